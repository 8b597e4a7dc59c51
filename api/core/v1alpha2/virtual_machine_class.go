package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationDefaultClass marks the VirtualMachineClass ("true") that machines without virtualMachineClassName get.
const AnnotationDefaultClass = "virtualmachineclass.virtualization.deckhouse.io/is-default-class"

// VirtualMachineClass is a cluster-wide kind of virtual machine: the CPU model and features, the nodes the machines may run on, and the sizing policies their cores, core fractions and memory must follow. In v1alpha2 core fractions are integers; v1alpha3 (the storage version) writes them as percentages.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName={vmc,vmcs,vmclass,vmclasses},categories={virtualization,virtualization-cluster}
// +kubebuilder:deprecatedversion:warning="virtualization.deckhouse.io/v1alpha2 VirtualMachineClass is deprecated; use virtualization.deckhouse.io/v1alpha3"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualMachineClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineClassSpec `json:"spec"`
	// +optional
	Status VirtualMachineClassStatus `json:"status,omitempty"`
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
	NodeSelector NodeSelector `json:"nodeSelector,omitempty"`
	// Tolerations let the class's machines run on nodes with matching taints.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// CPU is the processor the class's machines see. Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.cpu is immutable"
	CPU CPU `json:"cpu"`
	// SizingPolicies are the allowed sizes of the class's machines; a machine must fit the policy whose core range holds its cores.
	// +optional
	// +listType=atomic
	SizingPolicies []SizingPolicy `json:"sizingPolicies,omitempty"`
}

// NodeSelector selects nodes by labels.
type NodeSelector struct {
	// MatchLabels are labels a node must have.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// MatchExpressions are label requirements a node must meet.
	// +optional
	// +listType=atomic
	MatchExpressions []corev1.NodeSelectorRequirement `json:"matchExpressions,omitempty"`
}

// CPUType says how the processor of a class's machines is chosen.
// +kubebuilder:validation:Enum=Host;HostPassthrough;Discovery;Model;Features
type CPUType string

// The CPU types.
const (
	// CPUTypeHost: a virtual processor with the host's features that every node of the class has.
	CPUTypeHost CPUType = "Host"
	// CPUTypeHostPassthrough: the node's processor as it is (machines migrate only between identical nodes).
	CPUTypeHostPassthrough CPUType = "HostPassthrough"
	// CPUTypeDiscovery: the features common to the nodes that discovery.nodeSelector selects.
	CPUTypeDiscovery CPUType = "Discovery"
	// CPUTypeModel: a named processor model (field `model`).
	CPUTypeModel CPUType = "Model"
	// CPUTypeFeatures: a processor with the listed features (field `features`).
	CPUTypeFeatures CPUType = "Features"
)

// CPU is the processor of a class's machines: `type` and its fields.
//
// +kubebuilder:validation:XValidation:rule="has(self.model) == (self.type == 'Model')",message="spec.cpu.model must be set when, and only when, spec.cpu.type is Model",fieldPath=".model"
// +kubebuilder:validation:XValidation:rule="self.type != 'Features' || has(self.features) && size(self.features) > 0",message="spec.cpu.features must list at least one feature when spec.cpu.type is Features",fieldPath=".features"
// +kubebuilder:validation:XValidation:rule="!has(self.discovery) || self.type == 'Discovery'",message="spec.cpu.discovery is only allowed when spec.cpu.type is Discovery",fieldPath=".discovery"
type CPU struct {
	// Type says how the processor is chosen: Host, HostPassthrough, Discovery, Model or Features.
	Type CPUType `json:"type"`
	// Model is the processor model as libvirt names it (for example Nehalem), for type Model.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Model string `json:"model,omitempty"`
	// Features are processor features the nodes must have and the machines see (for example avx2), for type Features (or on top of a Model).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +optional
	// +listType=set
	Features []string `json:"features,omitempty"`
	// Discovery selects the nodes whose common features the processor has, for type Discovery.
	// +optional
	Discovery *CPUDiscovery `json:"discovery,omitempty"`
}

// CPUDiscovery selects the nodes whose common processor features a class uses.
type CPUDiscovery struct {
	// NodeSelector selects the nodes; every node of the class when empty.
	// +optional
	NodeSelector metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// SizingPolicy is one allowed size range of a class's machines.
type SizingPolicy struct {
	SizingPolicyResources `json:",inline"`
	// CoreFractions are the core fractions (in percent, 1 to 100) a machine of this policy may have.
	// +optional
	// +listType=atomic
	CoreFractions []CoreFractionValue `json:"coreFractions,omitempty"`
	// DefaultCoreFraction is the core fraction (in percent) of a machine of this policy that sets none.
	// +optional
	DefaultCoreFraction *CoreFractionValue `json:"defaultCoreFraction,omitempty"`
}

// CoreFractionValue is a core fraction in percent.
// +kubebuilder:validation:Minimum=1
// +kubebuilder:validation:Maximum=100
type CoreFractionValue int

// SizingPolicyResources are the cores and memory of a sizing policy, the same in every version.
type SizingPolicyResources struct {
	// Cores is the range of cores the policy applies to.
	// +optional
	Cores *SizingPolicyCores `json:"cores,omitempty"`
	// Memory is the memory a machine of this policy may have.
	// +optional
	Memory *SizingPolicyMemory `json:"memory,omitempty"`
}

// SizingPolicyCores is a range of core counts.
type SizingPolicyCores struct {
	// Min is the smallest number of cores.
	// +kubebuilder:validation:Minimum=1
	Min int `json:"min"`
	// Max is the largest number of cores.
	// +kubebuilder:validation:Minimum=1
	Max int `json:"max"`
	// Step: the cores must be min plus a multiple of it.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Step int `json:"step,omitempty"`
}

// SizingPolicyMemory is the memory a machine of a sizing policy may have.
type SizingPolicyMemory struct {
	MemoryMinMax `json:",inline"`
	// Step: the memory must be min plus a multiple of it.
	// +optional
	Step *resource.Quantity `json:"step,omitempty"`
	// PerCore bounds the memory per core.
	// +optional
	PerCore *MemoryMinMax `json:"perCore,omitempty"`
}

// MemoryMinMax is a range of memory sizes.
type MemoryMinMax struct {
	// Min is the smallest size.
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`
	// Max is the largest size.
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`
}

// VirtualMachineClassPhase is the lifecycle phase of a class.
// +kubebuilder:validation:Enum=Pending;Ready;Terminating
type VirtualMachineClassPhase string

// The class phases.
const (
	// ClassPhasePending: the class is not usable yet (for example, no node matches).
	ClassPhasePending VirtualMachineClassPhase = "Pending"
	// ClassPhaseReady: machines can use the class.
	ClassPhaseReady VirtualMachineClassPhase = "Ready"
	// ClassPhaseTerminating: the class is being deleted.
	ClassPhaseTerminating VirtualMachineClassPhase = "Terminating"
)

// VirtualMachineClassStatus is the observed state of a class, the same in every version.
type VirtualMachineClassStatus struct {
	// Phase of the class: Pending, Ready or Terminating.
	// +optional
	Phase VirtualMachineClassPhase `json:"phase,omitempty"`
	// AvailableNodes are the nodes the class's machines can run on.
	// +optional
	// +listType=set
	AvailableNodes []string `json:"availableNodes,omitempty"`
	// MaxAllocatableResources are the largest resources a single node of the class offers.
	// +optional
	MaxAllocatableResources corev1.ResourceList `json:"maxAllocatableResources,omitempty"`
	// CPUFeatures are the processor features of the class's machines.
	// +optional
	CPUFeatures CPUFeatures `json:"cpuFeatures,omitempty"`
	// Conditions: Discovered and InUse.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// CPUFeatures are the processor features of a class's machines.
type CPUFeatures struct {
	// Enabled are the features the machines see (for type Discovery, those common to the selected nodes, from the node labeller's labels).
	// +optional
	// +listType=set
	Enabled []string `json:"enabled,omitempty"`
	// NotEnabledCommon are features every available node has but the machines do not see.
	// +optional
	// +listType=set
	NotEnabledCommon []string `json:"notEnabledCommon,omitempty"`
}
