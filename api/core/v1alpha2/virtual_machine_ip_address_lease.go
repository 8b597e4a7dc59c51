package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineIPAddressLease holds one IPv4 address for a VirtualMachineIPAddress. It is named after the address (ip-10-66-10-1 for 10.66.10.1), so creating it is the lock: two addresses cannot hold the same lease.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName={vmipl,vmipls},categories={virtualization,virtualization-cluster}
// +kubebuilder:printcolumn:name="VirtualMachineIPAddress",type="string",JSONPath=".spec.virtualMachineIPAddressRef.name"
// +kubebuilder:printcolumn:name="Namespace",type="string",JSONPath=".spec.virtualMachineIPAddressRef.namespace"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^ip-(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(-(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$')",message="metadata.name must be the leased IPv4 address as ip-A-B-C-D, for example ip-10-66-10-1"
type VirtualMachineIPAddressLease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec VirtualMachineIPAddressLeaseSpec `json:"spec,omitempty"`
	// +optional
	Status VirtualMachineIPAddressLeaseStatus `json:"status,omitempty"`
}

// VirtualMachineIPAddressLeaseList is a list of VirtualMachineIPAddressLeases.
//
// +kubebuilder:object:root=true
type VirtualMachineIPAddressLeaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualMachineIPAddressLeases.
	Items []VirtualMachineIPAddressLease `json:"items"`
}

// VirtualMachineIPAddressLeaseSpec says who holds the address.
type VirtualMachineIPAddressLeaseSpec struct {
	// VirtualMachineIPAddressRef is the VirtualMachineIPAddress that holds the lease; empty while the released lease is kept for its retention period.
	// +optional
	VirtualMachineIPAddressRef *VirtualMachineIPAddressLeaseIPAddressRef `json:"virtualMachineIPAddressRef,omitempty"`
}

// VirtualMachineIPAddressLeaseIPAddressRef names the VirtualMachineIPAddress of a lease.
type VirtualMachineIPAddressLeaseIPAddressRef struct {
	// Name of the VirtualMachineIPAddress.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the VirtualMachineIPAddress.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// VirtualMachineIPAddressLeasePhase is the lifecycle phase of a lease.
// +kubebuilder:validation:Enum=Bound;Released
type VirtualMachineIPAddressLeasePhase string

// The lease phases.
const (
	// VirtualMachineIPAddressLeasePhaseBound: an address holds the lease.
	VirtualMachineIPAddressLeasePhaseBound VirtualMachineIPAddressLeasePhase = "Bound"
	// VirtualMachineIPAddressLeasePhaseReleased: the address is free; the lease is kept for a retention period and then deleted.
	VirtualMachineIPAddressLeasePhaseReleased VirtualMachineIPAddressLeasePhase = "Released"
)

// VirtualMachineIPAddressLeaseStatus is the observed state of a lease.
type VirtualMachineIPAddressLeaseStatus struct {
	// Phase of the lease: Bound or Released.
	// +optional
	Phase VirtualMachineIPAddressLeasePhase `json:"phase,omitempty"`
	// Conditions: Bound.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
