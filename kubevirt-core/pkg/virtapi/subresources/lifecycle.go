// Package subresources serves the core's aggregated API, subresources.kubevirt.io/v1: the VM
// lifecycle commands (start, stop, restart) and the VMI commands (pause, unpause, freeze, ...),
// with KubeVirt's methods, status codes and messages.
//
// The VM commands are pure plans (this file): a VM, its VMI and the options in, a patch or a
// Status error out. The handler only fetches, authorizes and applies.
package subresources

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Plan is what a command changes: a merge patch of the VM's spec, or a JSON patch of its status.
type Plan struct {
	SpecMergePatch   []byte
	StatusJSONPatch  []byte
	DeleteLauncherOf *kubevirtv1.VirtualMachineInstance
	// CreateMigration is a migration object to create (PUT .../migrate).
	CreateMigration *kubevirtv1.VirtualMachineInstanceMigration
	// DryRun sends the patch, delete or create with dryRun=All: the apiserver checks it and
	// stores nothing, as KubeVirt passes its options' dryRun on.
	DryRun bool
}

var vmResource = kubevirtv1.Resource("virtualmachine")

func conflict(name, format string, args ...any) *apierrors.StatusError {
	return apierrors.NewConflict(vmResource, name, fmt.Errorf(format, args...))
}

// vmiFinal tells whether a VMI has ended, as KubeVirt's IsFinal.
func vmiFinal(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi != nil && (vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed)
}

// runningPatch switches the VM on or off in the field the user uses: runStrategy or running.
func runningPatch(vm *kubevirtv1.VirtualMachine, running bool) []byte {
	if vm.Spec.RunStrategy != nil {
		s := kubevirtv1.RunStrategyHalted
		if running {
			s = kubevirtv1.RunStrategyAlways
		}
		return []byte(fmt.Sprintf(`{"spec":{"runStrategy":%q}}`, s))
	}
	return []byte(fmt.Sprintf(`{"spec":{"running":%t}}`, running))
}

// stateChangePatch appends requests to status.stateChangeRequests with a test op, so that two
// commands racing each other cannot both win. A lone stop replaces pending requests: stopping
// always takes precedence.
func stateChangePatch(vm *kubevirtv1.VirtualMachine, reqs ...kubevirtv1.VirtualMachineStateChangeRequest) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	var ops []op
	if equality.Semantic.DeepEqual(vm.Status, kubevirtv1.VirtualMachineStatus{}) {
		ops = append(ops, op{Op: "add", Path: "/status", Value: kubevirtv1.VirtualMachineStatus{StateChangeRequests: reqs}})
	} else {
		verb := "add"
		if len(vm.Status.StateChangeRequests) > 0 {
			if len(reqs) != 1 || reqs[0].Action != kubevirtv1.StopRequest {
				return nil, fmt.Errorf("unable to complete request: stop/start already underway")
			}
			verb = "replace"
		}
		// A missing list tests as null, which is what the apiserver's JSON patch compares it with.
		old := vm.Status.StateChangeRequests
		ops = append(ops,
			op{Op: "test", Path: "/status/stateChangeRequests", Value: old},
			op{Op: verb, Path: "/status/stateChangeRequests", Value: reqs})
	}
	if vm.Status.StartFailure != nil {
		// A user's explicit command ends the crash-loop back-off.
		ops = append(ops, op{Op: "remove", Path: "/status/startFailure"})
	}
	return json.Marshal(ops)
}

func requestPlan(vm *kubevirtv1.VirtualMachine, reqs ...kubevirtv1.VirtualMachineStateChangeRequest) (Plan, *apierrors.StatusError) {
	p, err := stateChangePatch(vm, reqs...)
	if err != nil {
		return Plan{}, apierrors.NewInternalError(err)
	}
	return Plan{StatusJSONPatch: p}, nil
}

// StartPlan is PUT .../virtualmachines/NAME/start.
func StartPlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.StartOptions) (Plan, *apierrors.StatusError) {
	return dryRunPlan(opts.DryRun, func() (Plan, *apierrors.StatusError) { return startPlan(vm, vmi, opts) })
}

func startPlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.StartOptions) (Plan, *apierrors.StatusError) {
	if vmi != nil && !vmiFinal(vmi) && vmi.Status.Phase != kubevirtv1.Unknown && vmi.Status.Phase != kubevirtv1.VmPhaseUnset {
		return Plan{}, conflict(vm.Name, "VM is already running")
	}
	strategy, err := vm.RunStrategy()
	if err != nil {
		return Plan{}, apierrors.NewInternalError(err)
	}
	data := map[string]string{}
	if opts.Paused {
		data[kubevirtv1.StartRequestDataPausedKey] = kubevirtv1.StartRequestDataPausedTrue
	}
	start := kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest}
	if len(data) > 0 {
		start.Data = data
	}
	switch strategy {
	case kubevirtv1.RunStrategyHalted:
		if opts.Paused {
			return requestPlan(vm, start)
		}
		return Plan{SpecMergePatch: runningPatch(vm, true)}, nil
	case kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyManual:
		if strategy == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Failed {
			return Plan{}, conflict(vm.Name, "%v does not support starting VM from failed state", kubevirtv1.RunStrategyRerunOnFailure)
		}
		if (strategy == kubevirtv1.RunStrategyRerunOnFailure && vmi != nil && vmi.Status.Phase == kubevirtv1.Succeeded) ||
			(strategy == kubevirtv1.RunStrategyManual && vmiFinal(vmi)) {
			uid := vmi.UID
			return requestPlan(vm, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid}, start)
		}
		return requestPlan(vm, start)
	}
	return Plan{}, conflict(vm.Name, "%v does not support manual start requests", strategy)
}

// StopPlan is PUT .../virtualmachines/NAME/stop.
func StopPlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.StopOptions) (Plan, *apierrors.StatusError) {
	return dryRunPlan(opts.DryRun, func() (Plan, *apierrors.StatusError) { return stopPlan(vm, vmi, opts) })
}

func stopPlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.StopOptions) (Plan, *apierrors.StatusError) {
	strategy, err := vm.RunStrategy()
	if err != nil {
		return Plan{}, apierrors.NewInternalError(err)
	}
	active := vmi != nil && !vmiFinal(vmi)
	switch strategy {
	case kubevirtv1.RunStrategyHalted:
		if !active {
			return Plan{}, conflict(vm.Name, "VM is not running")
		}
		old := int64(-1)
		if vmi.Spec.TerminationGracePeriodSeconds != nil {
			old = *vmi.Spec.TerminationGracePeriodSeconds
		}
		if opts.GracePeriod == nil || (old >= 0 && *opts.GracePeriod >= old) {
			return Plan{}, conflict(vm.Name, "%v only supports manual stop requests with a shorter graceperiod", kubevirtv1.RunStrategyHalted)
		}
		fallthrough
	case kubevirtv1.RunStrategyManual:
		if !active {
			return Plan{}, conflict(vm.Name, "VM is not running")
		}
		uid := vmi.UID
		return requestPlan(vm, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid})
	}
	return Plan{SpecMergePatch: runningPatch(vm, false)}, nil
}

// RestartPlan is PUT .../virtualmachines/NAME/restart.
func RestartPlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.RestartOptions) (Plan, *apierrors.StatusError) {
	return dryRunPlan(opts.DryRun, func() (Plan, *apierrors.StatusError) { return restartPlan(vm, vmi, opts) })
}

func restartPlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.RestartOptions) (Plan, *apierrors.StatusError) {
	if g := opts.GracePeriodSeconds; g != nil {
		if *g > 0 {
			return Plan{}, apierrors.NewBadRequest("For force restart, only gracePeriod=0 is supported for now")
		}
		if *g < 0 {
			return Plan{}, apierrors.NewBadRequest("gracePeriod has to be greater or equal to 0")
		}
	}
	strategy, err := vm.RunStrategy()
	if err != nil {
		return Plan{}, apierrors.NewInternalError(err)
	}
	if strategy == kubevirtv1.RunStrategyHalted || strategy == kubevirtv1.RunStrategyOnce {
		// KubeVirt spells it "RunStategy"; clients match on the message, so it stays.
		return Plan{}, conflict(vm.Name, "RunStategy %v does not support manual restart requests", strategy)
	}
	if vmi == nil {
		return Plan{}, conflict(vm.Name, "VM is not running: %v", kubevirtv1.RunStrategyHalted)
	}
	uid := vmi.UID
	p, serr := requestPlan(vm,
		kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid},
		kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	if serr == nil && opts.GracePeriodSeconds != nil {
		p.DeleteLauncherOf = vmi
	}
	return p, serr
}

// MigratePlan is PUT .../virtualmachines/NAME/migrate: a VirtualMachineInstanceMigration for the
// running VMI, named as KubeVirt names the ones it creates, carrying the caller's extra node
// selector.
func MigratePlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.MigrateOptions) (Plan, *apierrors.StatusError) {
	return dryRunPlan(opts.DryRun, func() (Plan, *apierrors.StatusError) { return migratePlan(vm, vmi, opts) })
}

func migratePlan(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, opts kubevirtv1.MigrateOptions) (Plan, *apierrors.StatusError) {
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		return Plan{}, conflict(vm.Name, "VM is not running")
	}
	m := &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubevirt-migrate-vm-", Namespace: vm.Namespace},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: vm.Name, AddedNodeSelector: opts.AddedNodeSelector},
	}
	return Plan{CreateMigration: m}, nil
}
