package v1alpha3

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/api/core/v1alpha2"
)

// VirtualMachineClass is a cluster-wide kind of virtual machine: the CPU model and features, the nodes the machines may run on, and the sizing policies their cores, core fractions and memory must follow.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName={vmc,vmcs,vmclass,vmclasses},categories={virtualization,virtualization-cluster}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualMachineClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineClassSpec `json:"spec"`
	// +optional
	Status v1alpha2.VirtualMachineClassStatus `json:"status,omitempty"`
}

// VirtualMachineClassList is a list of VirtualMachineClasses.
//
// +kubebuilder:object:root=true
type VirtualMachineClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualMachineClasses.
	Items []VirtualMachineClass `json:"items"`
}

// VirtualMachineClassSpec is the desired class.
type VirtualMachineClassSpec struct {
	// NodeSelector limits the class's machines to the matching nodes.
	// +optional
	NodeSelector v1alpha2.NodeSelector `json:"nodeSelector,omitempty"`
	// Tolerations let the class's machines run on nodes with matching taints.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// CPU is the processor the class's machines see. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.cpu is immutable"
	CPU v1alpha2.CPU `json:"cpu"`
	// SizingPolicies are the allowed sizes of the class's machines; a machine must fit the policy whose core range holds its cores.
	// +optional
	// +listType=atomic
	SizingPolicies []SizingPolicy `json:"sizingPolicies,omitempty"`
}

// SizingPolicy is one allowed size range of a class's machines.
type SizingPolicy struct {
	v1alpha2.SizingPolicyResources `json:",inline"`
	// CoreFractions are the core fractions a machine of this policy may have, as percentages from "1%" to "100%".
	// +optional
	// +listType=atomic
	CoreFractions []CoreFractionValue `json:"coreFractions,omitempty"`
	// DefaultCoreFraction is the core fraction of a machine of this policy that sets none, as a percentage.
	// +optional
	DefaultCoreFraction *CoreFractionValue `json:"defaultCoreFraction,omitempty"`
}

// CoreFractionValue is a core fraction as a percentage, "1%" to "100%".
// +kubebuilder:validation:Pattern=`^([1-9]|[1-9][0-9]|100)%$`
// +kubebuilder:validation:MaxLength=4
type CoreFractionValue string
