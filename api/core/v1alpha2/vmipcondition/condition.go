// Package vmipcondition names the condition types and reasons of a VirtualMachineIPAddress's
// status, as the reference module spells them.
package vmipcondition

// Type is a condition type of a VirtualMachineIPAddress.
type Type string

// The condition types.
const (
	// BoundType: a lease holds the address.
	BoundType Type = "Bound"
	// AttachedType: a machine uses the address.
	AttachedType Type = "Attached"
)

// BoundReason is a reason of the Bound condition.
type BoundReason string

// The Bound reasons.
const (
	VirtualMachineIPAddressLeaseNotFound        BoundReason = "VirtualMachineIPAddressLeaseNotFound"
	VirtualMachineIPAddressLeaseNotReady        BoundReason = "VirtualMachineIPAddressLeaseNotReady"
	VirtualMachineIPAddressLeaseAlreadyExists   BoundReason = "VirtualMachineIPAddressLeaseAlreadyExists"
	VirtualMachineIPAddressLeaseLost            BoundReason = "VirtualMachineIPAddressLeaseLost"
	VirtualMachineIPAddressIsOutOfTheValidRange BoundReason = "VirtualMachineIPAddressIsOutOfTheValidRange"
	Bound                                       BoundReason = "Bound"
)

// AttachedReason is a reason of the Attached condition.
type AttachedReason string

// The Attached reasons.
const (
	VirtualMachineNotFound AttachedReason = "VirtualMachineNotFound"
	Attached               AttachedReason = "Attached"
)
