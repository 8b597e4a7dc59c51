// Package vmbdacondition names the condition types and reasons of a
// VirtualMachineBlockDeviceAttachment's status, as the reference module spells them.
package vmbdacondition

// Type is a condition type of a VirtualMachineBlockDeviceAttachment.
type Type string

// The condition types.
const (
	// TypeBlockDeviceReady: the block device can be plugged in.
	TypeBlockDeviceReady Type = "BlockDeviceReady"
	// TypeVirtualMachineReady: the machine can take a disk.
	TypeVirtualMachineReady Type = "VirtualMachineReady"
	// TypeAttached: the guest has the disk.
	TypeAttached Type = "Attached"
	// TypeDiskAttachmentCapacityAvailable: the machine has room for one more block device
	// (the reference spells the type with its "Type" suffix).
	TypeDiskAttachmentCapacityAvailable Type = "DiskAttachmentCapacityAvailableType"
)

// DiskAttachmentCapacityAvailableReason is a reason of the DiskAttachmentCapacityAvailable condition.
type DiskAttachmentCapacityAvailableReason string

// The DiskAttachmentCapacityAvailable reasons.
const (
	ReasonCapacityAvailable DiskAttachmentCapacityAvailableReason = "CapacityAvailable"
	ReasonCapacityReached   DiskAttachmentCapacityAvailableReason = "CapacityReached"
)

// BlockDeviceReadyReason is a reason of the BlockDeviceReady condition.
type BlockDeviceReadyReason string

// The BlockDeviceReady reasons.
const (
	ReasonBlockDeviceReady    BlockDeviceReadyReason = "BlockDeviceReady"
	ReasonBlockDeviceNotReady BlockDeviceReadyReason = "BlockDeviceNotReady"
)

// VirtualMachineReadyReason is a reason of the VirtualMachineReady condition.
type VirtualMachineReadyReason string

// The VirtualMachineReady reasons.
const (
	ReasonVirtualMachineReady    VirtualMachineReadyReason = "VirtualMachineReady"
	ReasonVirtualMachineNotReady VirtualMachineReadyReason = "VirtualMachineNotReady"
)

// AttachedReason is a reason of the Attached condition.
type AttachedReason string

// The Attached reasons.
const (
	ReasonAttached              AttachedReason = "Attached"
	ReasonNotAttached           AttachedReason = "NotAttached"
	ReasonAttachmentRequestSent AttachedReason = "AttachmentRequestSent"
	// ReasonConflict: the disk is already in the machine's spec or plugged in by an older
	// attachment (to this machine or another).
	ReasonConflict AttachedReason = "Conflict"
)
