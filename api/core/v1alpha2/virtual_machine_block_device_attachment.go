package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineBlockDeviceAttachment hot-plugs one disk into a running VirtualMachine of its namespace; deleting it unplugs the disk. Its spec is immutable.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vmbda,vmbdas},categories={virtualization}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Virtual Machine Name",type="string",JSONPath=".status.virtualMachineName"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualMachineBlockDeviceAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineBlockDeviceAttachmentSpec `json:"spec"`
	// +optional
	Status VirtualMachineBlockDeviceAttachmentStatus `json:"status,omitempty"`
}

// VirtualMachineBlockDeviceAttachmentList is a list of VirtualMachineBlockDeviceAttachments.
//
// +kubebuilder:object:root=true
type VirtualMachineBlockDeviceAttachmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualMachineBlockDeviceAttachments.
	Items []VirtualMachineBlockDeviceAttachment `json:"items"`
}

// VirtualMachineBlockDeviceAttachmentSpec names the machine and the disk.
type VirtualMachineBlockDeviceAttachmentSpec struct {
	// VirtualMachineName is the VirtualMachine of the attachment's namespace to plug the disk into.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.virtualMachineName is immutable"
	VirtualMachineName string `json:"virtualMachineName"`
	// BlockDeviceRef is the disk to plug in.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.blockDeviceRef is immutable"
	BlockDeviceRef VMBDAObjectRef `json:"blockDeviceRef"`
}

// VMBDAObjectRef is the block device of an attachment.
type VMBDAObjectRef struct {
	// Kind of the device: VirtualDisk (of the attachment's namespace, attached read-write), VirtualImage (of the namespace) or ClusterVirtualImage.
	Kind VMBDAObjectRefKind `json:"kind"`
	// Name of the disk or image.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VMBDAObjectRefKind is the kind of an attachment's block device.
// +kubebuilder:validation:Enum=VirtualDisk;VirtualImage;ClusterVirtualImage
type VMBDAObjectRefKind string

// The kinds of block devices an attachment plugs in.
const (
	VMBDAObjectRefKindVirtualDisk         VMBDAObjectRefKind = "VirtualDisk"
	VMBDAObjectRefKindVirtualImage        VMBDAObjectRefKind = "VirtualImage"
	VMBDAObjectRefKindClusterVirtualImage VMBDAObjectRefKind = "ClusterVirtualImage"
)

// BlockDeviceAttachmentPhase is the lifecycle phase of an attachment.
// +kubebuilder:validation:Enum=Pending;InProgress;Attached;Failed;Terminating
type BlockDeviceAttachmentPhase string

// The attachment phases.
const (
	// BlockDeviceAttachmentPhasePending: the attachment waits for its machine or disk.
	BlockDeviceAttachmentPhasePending BlockDeviceAttachmentPhase = "Pending"
	// BlockDeviceAttachmentPhaseInProgress: the disk is being plugged in.
	BlockDeviceAttachmentPhaseInProgress BlockDeviceAttachmentPhase = "InProgress"
	// BlockDeviceAttachmentPhaseAttached: the guest has the disk.
	BlockDeviceAttachmentPhaseAttached BlockDeviceAttachmentPhase = "Attached"
	// BlockDeviceAttachmentPhaseFailed: the disk cannot be plugged in; the conditions say why.
	BlockDeviceAttachmentPhaseFailed BlockDeviceAttachmentPhase = "Failed"
	// BlockDeviceAttachmentPhaseTerminating: the attachment is being deleted and the disk unplugged.
	BlockDeviceAttachmentPhaseTerminating BlockDeviceAttachmentPhase = "Terminating"
)

// VirtualMachineBlockDeviceAttachmentStatus is the observed state of an attachment.
type VirtualMachineBlockDeviceAttachmentStatus struct {
	// Phase of the attachment: Pending, InProgress, Attached, Failed or Terminating.
	// +optional
	Phase BlockDeviceAttachmentPhase `json:"phase,omitempty"`
	// VirtualMachineName is the machine the disk is plugged into.
	// +optional
	VirtualMachineName string `json:"virtualMachineName,omitempty"`
	// Conditions: VirtualMachineReady, BlockDeviceReady and Attached.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
