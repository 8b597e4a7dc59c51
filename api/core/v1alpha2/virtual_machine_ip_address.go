package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualMachineIPAddress is the IP address of a VirtualMachine of its namespace, allocated from the module's virtualMachineCIDRs: any free address (Auto) or a chosen one (Static). The address is held by a cluster-wide VirtualMachineIPAddressLease.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vmip,vmips},categories={virtualization}
// +kubebuilder:printcolumn:name="Address",type="string",JSONPath=".status.address"
// +kubebuilder:printcolumn:name="Status",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="VM",type="string",JSONPath=".status.virtualMachineName"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualMachineIPAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a VirtualMachineIPAddress's spec cannot change after creation"
	Spec VirtualMachineIPAddressSpec `json:"spec"`
	// +optional
	Status VirtualMachineIPAddressStatus `json:"status,omitempty"`
}

// VirtualMachineIPAddressList is a list of VirtualMachineIPAddresses.
//
// +kubebuilder:object:root=true
type VirtualMachineIPAddressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualMachineIPAddresses.
	Items []VirtualMachineIPAddress `json:"items"`
}

// VirtualMachineIPAddressType says how an address is chosen.
// +kubebuilder:validation:Enum=Auto;Static
type VirtualMachineIPAddressType string

// The address types.
const (
	// VirtualMachineIPAddressTypeAuto: any free address of the range.
	VirtualMachineIPAddressTypeAuto VirtualMachineIPAddressType = "Auto"
	// VirtualMachineIPAddressTypeStatic: the address in staticIP.
	VirtualMachineIPAddressTypeStatic VirtualMachineIPAddressType = "Static"
)

// VirtualMachineIPAddressSpec is the desired address.
//
// +kubebuilder:validation:XValidation:rule="has(self.staticIP) == (self.type == 'Static')",message="spec.staticIP must be set when, and only when, spec.type is Static",fieldPath=".staticIP"
type VirtualMachineIPAddressSpec struct {
	// Type says how the address is chosen: Auto (any free address) or Static (staticIP).
	Type VirtualMachineIPAddressType `json:"type"`
	// StaticIP is the IPv4 address to hold, for type Static; it must be in the module's virtualMachineCIDRs and not leased by another address.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="spec.staticIP must be an IPv4 address"
	// +optional
	StaticIP string `json:"staticIP,omitempty"`
}

// VirtualMachineIPAddressPhase is the lifecycle phase of a VirtualMachineIPAddress.
// +kubebuilder:validation:Enum=Pending;Bound;Attached
type VirtualMachineIPAddressPhase string

// The address phases.
const (
	// VirtualMachineIPAddressPhasePending: no lease holds the address yet.
	VirtualMachineIPAddressPhasePending VirtualMachineIPAddressPhase = "Pending"
	// VirtualMachineIPAddressPhaseBound: a lease holds the address.
	VirtualMachineIPAddressPhaseBound VirtualMachineIPAddressPhase = "Bound"
	// VirtualMachineIPAddressPhaseAttached: a machine uses the address.
	VirtualMachineIPAddressPhaseAttached VirtualMachineIPAddressPhase = "Attached"
)

// VirtualMachineIPAddressStatus is the observed state of an address.
type VirtualMachineIPAddressStatus struct {
	// Address is the allocated IPv4 address.
	// +optional
	Address string `json:"address,omitempty"`
	// VirtualMachineName is the machine that uses the address.
	// +optional
	VirtualMachineName string `json:"virtualMachineName,omitempty"`
	// Phase of the address: Pending, Bound or Attached.
	// +optional
	Phase VirtualMachineIPAddressPhase `json:"phase,omitempty"`
	// Conditions: Bound and Attached.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
