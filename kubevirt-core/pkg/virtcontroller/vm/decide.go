// Package vm is virt-controller's VirtualMachine controller: it keeps one VirtualMachineInstance
// per VirtualMachine in line with the run strategy and the state change requests, and reports
// status as KubeVirt does.
//
// The decisions are pure functions of the VM, its VMI and the clock (this file and status.go); the
// reconciler only reads objects and carries decisions out.
package vm

import (
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Action is what the controller does with the VMI in one reconcile.
type Action int

const (
	// Nothing leaves the VMI as it is.
	Nothing Action = iota
	// Create makes a VMI from the template.
	Create
	// Delete removes the VMI, which stops the guest.
	Delete
	// Halt switches a Once VM to Halted after its only run, so that it is never started again.
	Halt
	// Run switches a Halted VM on (runStrategy Always, or running: true) for a start request,
	// which stays for the next reconcile to fulfil: how KubeVirt starts a Halted VM paused.
	Run
)

func (a Action) String() string {
	return [...]string{"Nothing", "Create", "Delete", "Halt", "Run"}[a]
}

// Decision is an action, and for Create, when it may happen at the earliest.
type Decision struct {
	Action Action
	// NotBefore delays a Create during a crash-loop back-off.
	NotBefore time.Time
	// ConsumeRequests is how many leading state change requests this decision fulfils.
	ConsumeRequests int
	// StartPaused makes a Create's VMI start paused: its start request asked for it.
	StartPaused bool
	// VolumeRequestsApplied drops status.volumeRequests: the reconcile carried them out.
	VolumeRequestsApplied bool
}

func finished(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi != nil && (vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed)
}

func deleting(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi != nil && vmi.DeletionTimestamp != nil
}

// Decide chooses the next action. vmi is nil when the VM has none. strategy must be valid.
func Decide(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, strategy kubevirtv1.VirtualMachineRunStrategy, now time.Time) Decision {
	if vm.DeletionTimestamp != nil {
		if vmi != nil && !deleting(vmi) {
			return Decision{Action: Delete}
		}
		return Decision{}
	}
	if d, ok := decideRequests(vm, vmi, strategy); ok {
		return d
	}
	if deleting(vmi) {
		// Wait for the old VMI to go before anything else.
		return Decision{}
	}
	switch strategy {
	case kubevirtv1.RunStrategyAlways:
		if finished(vmi) {
			return Decision{Action: Delete}
		}
		if vmi == nil {
			return Decision{Action: Create, NotBefore: retryAfter(vm)}
		}
	case kubevirtv1.RunStrategyRerunOnFailure:
		if vmi != nil && vmi.Status.Phase == kubevirtv1.Failed {
			return Decision{Action: Delete}
		}
		// A VMI that succeeded stays, so the guest is not started again until a Start request.
		if vmi == nil {
			return Decision{Action: Create, NotBefore: retryAfter(vm)}
		}
	case kubevirtv1.RunStrategyOnce:
		if finished(vmi) {
			return Decision{Action: Halt}
		}
		if vmi == nil {
			return Decision{Action: Create}
		}
	case kubevirtv1.RunStrategyHalted:
		if vmi != nil {
			return Decision{Action: Delete}
		}
	case kubevirtv1.RunStrategyManual:
		// Only state change requests start or stop a Manual VM.
	}
	return Decision{}
}

// decideRequests serves status.stateChangeRequests in order: a Stop for the current VMI deletes it,
// then a Start creates the next one.
func decideRequests(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, strategy kubevirtv1.VirtualMachineRunStrategy) (Decision, bool) {
	reqs := vm.Status.StateChangeRequests
	if len(reqs) == 0 {
		return Decision{}, false
	}
	switch reqs[0].Action {
	case kubevirtv1.StopRequest:
		if vmi == nil || (reqs[0].UID != nil && *reqs[0].UID != vmi.UID) {
			// The VMI the request was about is gone: the request is done.
			return Decision{ConsumeRequests: 1}, true
		}
		if deleting(vmi) {
			return Decision{}, true
		}
		return Decision{Action: Delete}, true
	case kubevirtv1.StartRequest:
		if vmi != nil && !finished(vmi) {
			// Running already, or being replaced: wait, then start.
			if deleting(vmi) {
				return Decision{}, true
			}
			return Decision{ConsumeRequests: 1}, true
		}
		if finished(vmi) {
			return Decision{Action: Delete}, true
		}
		if strategy == kubevirtv1.RunStrategyHalted {
			// Created now, the VMI would be deleted at once by the strategy: switch it first.
			return Decision{Action: Run}, true
		}
		paused := reqs[0].Data[kubevirtv1.StartRequestDataPausedKey] == kubevirtv1.StartRequestDataPausedTrue
		return Decision{Action: Create, ConsumeRequests: 1, StartPaused: paused}, true
	}
	// Unknown actions are dropped, as nothing could ever fulfil them.
	return Decision{ConsumeRequests: 1}, true
}

// Crash-loop back-off: KubeVirt waits 10s, doubling per consecutive failure, up to 5 minutes.
const (
	backoffBase = 10 * time.Second
	backoffMax  = 5 * time.Minute
)

func retryAfter(vm *kubevirtv1.VirtualMachine) time.Time {
	if f := vm.Status.StartFailure; f != nil && f.RetryAfterTimestamp != nil {
		return f.RetryAfterTimestamp.Time
	}
	return time.Time{}
}

// Backoff is the wait before the start after the n-th consecutive failure.
func Backoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	d := backoffBase
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	if d > backoffMax {
		d = backoffMax
	}
	return d
}
