package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/d8virt/api"
)

// SchemeGroupVersion is the group and version of the kinds in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: api.Group, Version: "v1alpha2"}

var (
	// SchemeBuilder registers the kinds of this package in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource qualifies a resource of this package with its group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&VirtualDisk{}, &VirtualDiskList{},
		&VirtualImage{}, &VirtualImageList{},
		&ClusterVirtualImage{}, &ClusterVirtualImageList{},
		&VirtualMachine{}, &VirtualMachineList{},
		&VirtualMachineClass{}, &VirtualMachineClassList{},
		&VirtualMachineOperation{}, &VirtualMachineOperationList{},
		&VirtualMachineBlockDeviceAttachment{}, &VirtualMachineBlockDeviceAttachmentList{},
		&VirtualMachineIPAddress{}, &VirtualMachineIPAddressList{},
		&VirtualMachineIPAddressLease{}, &VirtualMachineIPAddressLeaseList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
