package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group virtualization-api serves.
const GroupName = "subresources.virtualization.deckhouse.io"

// SchemeGroupVersion is the group and version of the kinds in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

var (
	// SchemeBuilder registers the kinds of this package in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &VirtualMachine{}, &VirtualMachineSession{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
