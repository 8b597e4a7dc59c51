// Package vmop is the VirtualMachineOperation controller: Start, Stop, Restart, Migrate and Evict
// of a VirtualMachine, carried out on the internal KubeVirt VM and VMI of the same name.
package vmop

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
)

// DefaultLiveMigrationPolicy applies to a VirtualMachine that names none, as the API documents.
const DefaultLiveMigrationPolicy = v1alpha2.PreferSafeMigrationPolicy

// refusal is why an operation may not run on a machine: the Completed condition's reason and
// message of the Failed operation.
type refusal struct {
	reason  vmopcondition.ReasonCompleted
	message string
}

// rule is which run policies and machine phases an operation type runs in.
type rule struct {
	policies []v1alpha2.RunPolicy
	phases   []v1alpha2.MachinePhase
	// forcedPhases are further phases a forced operation runs in.
	forcedPhases []v1alpha2.MachinePhase
}

var allPolicies = []v1alpha2.RunPolicy{v1alpha2.AlwaysOnPolicy, v1alpha2.AlwaysOffPolicy, v1alpha2.ManualPolicy, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy}

// rules are the reference module's: a machine that must always run is never started or stopped
// by hand (AlwaysOn restarts it, AlwaysOff never runs), and only a running machine migrates.
var rules = map[v1alpha2.VMOPType]rule{
	v1alpha2.VMOPTypeStart: {
		policies: []v1alpha2.RunPolicy{v1alpha2.ManualPolicy, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		phases:   []v1alpha2.MachinePhase{v1alpha2.MachineStopped, v1alpha2.MachineStopping},
	},
	v1alpha2.VMOPTypeStop: {
		policies:     []v1alpha2.RunPolicy{v1alpha2.ManualPolicy, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		phases:       []v1alpha2.MachinePhase{v1alpha2.MachinePending, v1alpha2.MachineStarting, v1alpha2.MachineRunning, v1alpha2.MachinePause},
		forcedPhases: []v1alpha2.MachinePhase{v1alpha2.MachineStopping},
	},
	v1alpha2.VMOPTypeRestart: {
		policies: []v1alpha2.RunPolicy{v1alpha2.AlwaysOnPolicy, v1alpha2.ManualPolicy, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		phases:   []v1alpha2.MachinePhase{v1alpha2.MachineStarting, v1alpha2.MachineRunning, v1alpha2.MachinePause},
	},
	v1alpha2.VMOPTypeMigrate: {policies: allPolicies, phases: []v1alpha2.MachinePhase{v1alpha2.MachineRunning}},
	v1alpha2.VMOPTypeEvict:   {policies: allPolicies, phases: []v1alpha2.MachinePhase{v1alpha2.MachineRunning}},
}

// RunPolicy is the machine's run policy, the API's default when it names none.
func RunPolicy(vm *v1alpha2.VirtualMachine) v1alpha2.RunPolicy {
	if vm.Spec.RunPolicy == "" {
		return v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy
	}
	return vm.Spec.RunPolicy
}

// MachinePhase is the machine's phase; a machine without one yet is Pending.
func MachinePhase(vm *v1alpha2.VirtualMachine) v1alpha2.MachinePhase {
	if vm.Status.Phase == "" {
		return v1alpha2.MachinePending
	}
	return vm.Status.Phase
}

// checkApplicable is nil when op may run on vm now, else why not: the run policy first, then the
// phase, then (for migrations) the live migration policy and the Migratable condition.
func checkApplicable(op *v1alpha2.VirtualMachineOperation, vm *v1alpha2.VirtualMachine) *refusal {
	r, ok := rules[op.Spec.Type]
	if !ok {
		return &refusal{vmopcondition.ReasonOperationFailed, fmt.Sprintf("spec.type %q is not an operation type", op.Spec.Type)}
	}
	policy, phase := RunPolicy(vm), MachinePhase(vm)
	if !slices.Contains(r.policies, policy) {
		return &refusal{vmopcondition.ReasonNotApplicableForRunPolicy,
			fmt.Sprintf("Operation type %s is not applicable for VirtualMachine with runPolicy %s", op.Spec.Type, policy)}
	}
	force := ptr.Deref(op.Spec.Force, false)
	if !slices.Contains(r.phases, phase) && (!force || !slices.Contains(r.forcedPhases, phase)) {
		return &refusal{vmopcondition.ReasonNotApplicableForVMPhase,
			fmt.Sprintf("Operation type %s is not applicable for VirtualMachine in phase %s", op.Spec.Type, phase)}
	}
	if isMigration(op) {
		if msg := checkLiveMigrationPolicy(op, vm); msg != "" {
			return &refusal{vmopcondition.ReasonNotApplicableForLiveMigrationPolicy, msg}
		}
		if c := meta.FindStatusCondition(vm.Status.Conditions, string(vmcondition.TypeMigratable)); c != nil && c.Status == metav1.ConditionFalse {
			return &refusal{vmopcondition.ReasonOperationFailed,
				fmt.Sprintf("Operation type %s is not applicable for a VirtualMachine that cannot migrate live: %s", op.Spec.Type, c.Message)}
		}
	}
	return nil
}

// checkLiveMigrationPolicy is why the machine's liveMigrationPolicy refuses the migration, or "":
// Never refuses every migration, AlwaysSafe a forced one, AlwaysForced one that is not forced.
func checkLiveMigrationPolicy(op *v1alpha2.VirtualMachineOperation, vm *v1alpha2.VirtualMachine) string {
	policy := vm.Spec.LiveMigrationPolicy
	if policy == "" {
		policy = DefaultLiveMigrationPolicy
	}
	switch force := ptr.Deref(op.Spec.Force, false); {
	case policy == v1alpha2.NeverMigrationPolicy:
		return fmt.Sprintf("Operation type %s is not applicable for VirtualMachine with liveMigrationPolicy %s", op.Spec.Type, policy)
	case policy == v1alpha2.AlwaysSafeMigrationPolicy && force:
		return fmt.Sprintf("force=true is not applicable for VirtualMachine with liveMigrationPolicy %s", policy)
	case policy == v1alpha2.AlwaysForcedMigrationPolicy && !force:
		return fmt.Sprintf("force=true is required for VirtualMachine with liveMigrationPolicy %s", policy)
	}
	return ""
}

func isMigration(op *v1alpha2.VirtualMachineOperation) bool {
	return op.Spec.Type == v1alpha2.VMOPTypeMigrate || op.Spec.Type == v1alpha2.VMOPTypeEvict
}

// CanSupersede reports whether newer replaces older, an operation on the same machine that has
// not finished: a Stop replaces a Start, Restart, Migrate or Evict, a forced Stop a graceful one,
// and a Restart a Start. Any other newer operation waits for older to finish.
func CanSupersede(older, newer *v1alpha2.VirtualMachineOperation) bool {
	if older.Spec.VirtualMachineName != newer.Spec.VirtualMachineName {
		return false
	}
	switch older.Spec.Type {
	case v1alpha2.VMOPTypeStart:
		return newer.Spec.Type == v1alpha2.VMOPTypeStop || newer.Spec.Type == v1alpha2.VMOPTypeRestart
	case v1alpha2.VMOPTypeStop:
		return !ptr.Deref(older.Spec.Force, false) && newer.Spec.Type == v1alpha2.VMOPTypeStop && ptr.Deref(newer.Spec.Force, false)
	case v1alpha2.VMOPTypeRestart, v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict:
		return newer.Spec.Type == v1alpha2.VMOPTypeStop
	}
	return false
}

// IsOlder orders operations by creation, then (creation times have whole seconds) the one whose
// signal went out first, then name.
func IsOlder(a, b *v1alpha2.VirtualMachineOperation) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if sa, sb := signalSent(a), signalSent(b); sa != sb {
		return sa
	}
	return a.Name < b.Name
}

// IsFinished reports whether the operation has reached a final phase.
func IsFinished(op *v1alpha2.VirtualMachineOperation) bool {
	switch op.Status.Phase {
	case v1alpha2.VMOPPhaseCompleted, v1alpha2.VMOPPhaseFailed, v1alpha2.VMOPPhaseSuperseded:
		return true
	}
	return false
}
