// Package vmiplcondition names the condition types and reasons of a VirtualMachineIPAddressLease's
// status, as the reference module spells them.
package vmiplcondition

// Type is a condition type of a VirtualMachineIPAddressLease.
type Type string

// The condition types.
const (
	// BoundType: a VirtualMachineIPAddress holds the lease.
	BoundType Type = "Bound"
)

// BoundReason is a reason of the Bound condition.
type BoundReason string

// The Bound reasons.
const (
	Bound                           BoundReason = "Bound"
	Released                        BoundReason = "Released"
	VirtualMachineIPAddressNotFound BoundReason = "VirtualMachineIPAddressNotFound"
)
