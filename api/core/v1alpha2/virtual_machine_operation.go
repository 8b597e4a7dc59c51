package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineOperation asks for one action on a VirtualMachine of its namespace: start, stop, restart, migrate or evict. Its spec is immutable; one operation at a time runs per machine.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vmop,vmops},categories={virtualization}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="VirtualMachine",type="string",JSONPath=".spec.virtualMachineName"
// +kubebuilder:printcolumn:name="Progress",type="string",JSONPath=".status.progress",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualMachineOperation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a VirtualMachineOperation's spec cannot change after creation"
	Spec VirtualMachineOperationSpec `json:"spec"`
	// +optional
	Status VirtualMachineOperationStatus `json:"status,omitempty"`
}

// VirtualMachineOperationList is a list of VirtualMachineOperations.
//
// +kubebuilder:object:root=true
type VirtualMachineOperationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualMachineOperations.
	Items []VirtualMachineOperation `json:"items"`
}

// VMOPType is the action of a VirtualMachineOperation.
// +kubebuilder:validation:Enum=Start;Stop;Restart;Migrate;Evict
type VMOPType string

// The operation types.
const (
	VMOPTypeStart   VMOPType = "Start"
	VMOPTypeStop    VMOPType = "Stop"
	VMOPTypeRestart VMOPType = "Restart"
	VMOPTypeMigrate VMOPType = "Migrate"
	VMOPTypeEvict   VMOPType = "Evict"
)

// VirtualMachineOperationSpec is the action to take.
//
// +kubebuilder:validation:XValidation:rule="!has(self.force) || self.type != 'Start'",message="spec.force is not allowed for type Start",fieldPath=".force"
type VirtualMachineOperationSpec struct {
	// Type of the action: Start, Stop, Restart, Migrate or Evict (a live migration off the machine's node).
	Type VMOPType `json:"type"`
	// VirtualMachineName is the VirtualMachine of the operation's namespace to act on.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	VirtualMachineName string `json:"virtualMachineName"`
	// Force makes Stop and Restart kill the guest instead of shutting it down, and Migrate and Evict slow the guest down until the migration ends.
	// +optional
	Force *bool `json:"force,omitempty"`
}

// VMOPPhase is the lifecycle phase of a VirtualMachineOperation.
// +kubebuilder:validation:Enum=Pending;InProgress;Completed;Failed;Terminating;Superseded
type VMOPPhase string

// The operation phases.
const (
	// VMOPPhasePending: the operation waits, for example for another operation on the machine.
	VMOPPhasePending VMOPPhase = "Pending"
	// VMOPPhaseInProgress: the action runs.
	VMOPPhaseInProgress VMOPPhase = "InProgress"
	// VMOPPhaseCompleted: the action is done.
	VMOPPhaseCompleted VMOPPhase = "Completed"
	// VMOPPhaseFailed: the action failed or was not allowed; the Completed condition says why.
	VMOPPhaseFailed VMOPPhase = "Failed"
	// VMOPPhaseTerminating: the operation is being deleted.
	VMOPPhaseTerminating VMOPPhase = "Terminating"
	// VMOPPhaseSuperseded: a newer operation on the machine replaced this one before it ran.
	VMOPPhaseSuperseded VMOPPhase = "Superseded"
)

// VirtualMachineOperationStatus is the observed state of an operation.
type VirtualMachineOperationStatus struct {
	// Phase of the operation: Pending, InProgress, Completed, Failed, Terminating or Superseded.
	// +optional
	Phase VMOPPhase `json:"phase,omitempty"`
	// Progress of a migration, in percent (for example `45%`).
	// +optional
	Progress string `json:"progress,omitempty"`
	// Conditions: Completed and SignalSent.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
