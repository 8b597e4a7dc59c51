package vm

import (
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// Power is what the controller asks the core to do with the internal VM, through its
// status.stateChangeRequests (the internal VM runs with runStrategy Manual).
type Power int

const (
	// PowerNone leaves the guest as it is.
	PowerNone Power = iota
	// PowerStart starts the guest; the core first removes a finished VMI.
	PowerStart
	// PowerStop stops the guest, or removes a VMI whose guest has ended.
	PowerStop
	// PowerRestart stops the guest and starts it again, with the internal VM's current template.
	PowerRestart
)

func (p Power) String() string { return [...]string{"None", "Start", "Stop", "Restart"}[p] }

// PowerInputs are what DecidePower looks at.
type PowerInputs struct {
	Policy v1alpha2.RunPolicy
	// StartPending: the internal VM was created for a policy that starts it and not started yet
	// (StartPending).
	StartPending bool
	// RequestsPending: the internal VM has state change requests the core has not served yet.
	RequestsPending bool
	// VMI is the internal VMI, nil when there is none.
	VMI *kubevirtv1.VirtualMachineInstance
	// RestartForChanges: changes await a restart and restartApprovalMode is Automatic.
	RestartForChanges bool
}

// DecidePower enforces the run policy as the reference module does:
//   - AlwaysOn: the guest runs; one that stopped or failed, from inside too, is started again.
//   - AlwaysOnUnlessStoppedManually: started after creation and after a failure; a guest that
//     powered itself off, or was stopped by an operation, stays Stopped.
//   - Manual: only operations start and stop it; a guest that ended stays Stopped.
//   - AlwaysOff: never runs.
//
// Every policy but AlwaysOff leaves an ended guest's VMI to the core only once it is handled:
// an ended VMI is removed (Stop) so the VM shows Stopped.
func DecidePower(in PowerInputs) Power {
	vmi := in.VMI
	if in.RequestsPending || (vmi != nil && vmi.DeletionTimestamp != nil) {
		return PowerNone
	}
	ended := vmi != nil && (vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed)
	failed := vmi != nil && vmi.Status.Phase == kubevirtv1.Failed
	switch in.Policy {
	case v1alpha2.AlwaysOffPolicy:
		if vmi != nil {
			return PowerStop
		}
		return PowerNone
	case v1alpha2.AlwaysOnPolicy:
		if vmi == nil || ended {
			return PowerStart
		}
	case v1alpha2.ManualPolicy:
		if ended {
			return PowerStop
		}
	default: // AlwaysOnUnlessStoppedManually, the default
		switch {
		case vmi == nil && in.StartPending, failed:
			return PowerStart
		case ended:
			return PowerStop
		}
	}
	if vmi != nil && !ended && in.RestartForChanges {
		return PowerRestart
	}
	return PowerNone
}

// StartsAtCreation reports whether a new internal VM of this policy is started.
func StartsAtCreation(p v1alpha2.RunPolicy) bool {
	return p != v1alpha2.AlwaysOffPolicy && p != v1alpha2.ManualPolicy
}

// StartPending says whether the controller owes the internal VM its first start: the policy
// starts a new internal VM, and the VM's stored phase is still Pending (or none), which it is
// only until the status written with the start request (Starting), or with a policy that does
// not start (Stopped). A start request that failed leaves the phase Pending, so the next
// reconcile asks again; an internal VM made again after it went starts like a new one. The mark
// lives in the status written anyway: no write of its own.
func StartPending(vm *v1alpha2.VirtualMachine) bool {
	return StartsAtCreation(vm.Spec.RunPolicy) && (vm.Status.Phase == "" || vm.Status.Phase == v1alpha2.MachinePending)
}

// StateChangeRequests are the requests that carry p out for the VMI (nil when there is none).
func StateChangeRequests(p Power, vmi *kubevirtv1.VirtualMachineInstance) []kubevirtv1.VirtualMachineStateChangeRequest {
	start := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest}
	stop := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest}
	if vmi != nil {
		uid := vmi.UID
		stop.UID = &uid
	}
	switch p {
	case PowerStart:
		return []kubevirtv1.VirtualMachineStateChangeRequest{start}
	case PowerStop:
		return []kubevirtv1.VirtualMachineStateChangeRequest{stop}
	case PowerRestart:
		return []kubevirtv1.VirtualMachineStateChangeRequest{stop, start}
	}
	return nil
}
