// Package vmclasscondition names the condition types and reasons of a VirtualMachineClass's
// status, as the reference module spells them.
package vmclasscondition

// Type is a condition type of a VirtualMachineClass.
type Type string

// The condition types.
const (
	// TypeDiscovered: the processor features of a Discovery class are computed.
	TypeDiscovered Type = "Discovered"
	// TypeInUse: machines use the class, so it cannot be deleted.
	TypeInUse Type = "InUse"
)

// Reason is a reason of a VirtualMachineClass's condition.
type Reason string

// The reasons.
const (
	ReasonDiscoverySucceeded Reason = "DiscoverySucceeded"
	ReasonDiscoverySkip      Reason = "DiscoverySkip"
	ReasonDiscoveryFailed    Reason = "DiscoveryFailed"
	ReasonVMClassInUse       Reason = "VirtualMachineClassInUse"
	ReasonVMClassFree        Reason = "VirtualMachineClassFree"
)
