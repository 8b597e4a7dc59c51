// Package vmopcondition names the condition types and reasons of a VirtualMachineOperation's
// status, as the reference module spells them.
package vmopcondition

// Type is a condition type of a VirtualMachineOperation.
type Type string

// The condition types.
const (
	// TypeCompleted: the operation is done (True) or why not yet or never (False).
	TypeCompleted Type = "Completed"
	// TypeSignalSent: the action was handed to the machine.
	TypeSignalSent Type = "SignalSent"
)

// ReasonCompleted is a reason of the Completed condition.
type ReasonCompleted string

// The Completed reasons.
const (
	ReasonVirtualMachineNotFound              ReasonCompleted = "VirtualMachineNotFound"
	ReasonNotApplicableForVMPhase             ReasonCompleted = "NotApplicableForVirtualMachinePhase"
	ReasonNotApplicableForRunPolicy           ReasonCompleted = "NotApplicableForRunPolicy"
	ReasonNotApplicableForLiveMigrationPolicy ReasonCompleted = "NotApplicableForLiveMigrationPolicy"
	ReasonOtherOperationsAreInProgress        ReasonCompleted = "OtherOperationsAreInProgress"
	ReasonOperationInProgress                 ReasonCompleted = "OperationInProgress"
	ReasonMigrationPending                    ReasonCompleted = "MigrationPending"
	ReasonMigrationRunning                    ReasonCompleted = "MigrationRunning"
	ReasonOperationFailed                     ReasonCompleted = "OperationFailed"
	ReasonOperationCompleted                  ReasonCompleted = "OperationCompleted"
	ReasonSuperseded                          ReasonCompleted = "Superseded"
)

// ReasonSignalSent is a reason of the SignalSent condition.
type ReasonSignalSent string

// The SignalSent reasons.
const (
	ReasonSignalSentError   ReasonSignalSent = "SignalSentError"
	ReasonSignalSentSuccess ReasonSignalSent = "SignalSentSuccess"
)
