package vmop

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
)

// matrixPhases are the columns of applicabilityMatrix.
var matrixPhases = []v1alpha2.MachinePhase{
	v1alpha2.MachinePending, v1alpha2.MachineStarting, v1alpha2.MachineRunning, v1alpha2.MachineStopping,
	v1alpha2.MachineStopped, v1alpha2.MachineMigrating, v1alpha2.MachinePause, v1alpha2.MachineTerminating,
}

// applicabilityMatrix is the outcome of every type, force, run policy and machine phase: one
// character per phase of matrixPhases: + runs, R refused for the run policy, P refused for the
// phase.
var applicabilityMatrix = []struct {
	typ    v1alpha2.VMOPType
	force  bool
	policy v1alpha2.RunPolicy
	want   string
}{
	// phases:                                                        Pend Start Run Stopping Stopped Migr Pause Term
	{v1alpha2.VMOPTypeStart, false, v1alpha2.AlwaysOnPolicy, "RRRRRRRR"},
	{v1alpha2.VMOPTypeStart, false, v1alpha2.AlwaysOffPolicy, "RRRRRRRR"},
	{v1alpha2.VMOPTypeStart, false, v1alpha2.ManualPolicy, "PPP++PPP"},
	{v1alpha2.VMOPTypeStart, false, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, "PPP++PPP"},
	{v1alpha2.VMOPTypeStop, false, v1alpha2.AlwaysOnPolicy, "RRRRRRRR"},
	{v1alpha2.VMOPTypeStop, false, v1alpha2.AlwaysOffPolicy, "RRRRRRRR"},
	{v1alpha2.VMOPTypeStop, false, v1alpha2.ManualPolicy, "+++PPP+P"},
	{v1alpha2.VMOPTypeStop, true, v1alpha2.ManualPolicy, "++++PP+P"},
	{v1alpha2.VMOPTypeStop, false, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, "+++PPP+P"},
	{v1alpha2.VMOPTypeStop, true, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, "++++PP+P"},
	{v1alpha2.VMOPTypeRestart, false, v1alpha2.AlwaysOnPolicy, "P++PPP+P"},
	{v1alpha2.VMOPTypeRestart, true, v1alpha2.AlwaysOnPolicy, "P++PPP+P"},
	{v1alpha2.VMOPTypeRestart, false, v1alpha2.AlwaysOffPolicy, "RRRRRRRR"},
	{v1alpha2.VMOPTypeRestart, false, v1alpha2.ManualPolicy, "P++PPP+P"},
	{v1alpha2.VMOPTypeRestart, false, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, "P++PPP+P"},
	{v1alpha2.VMOPTypeMigrate, false, v1alpha2.AlwaysOnPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeMigrate, false, v1alpha2.AlwaysOffPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeMigrate, false, v1alpha2.ManualPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeMigrate, false, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeEvict, false, v1alpha2.AlwaysOnPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeEvict, false, v1alpha2.AlwaysOffPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeEvict, false, v1alpha2.ManualPolicy, "PP+PPPPP"},
	{v1alpha2.VMOPTypeEvict, true, v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, "PP+PPPPP"},
}

func TestApplicabilityMatrix(t *testing.T) {
	seen := map[v1alpha2.VMOPType]int{}
	for _, row := range applicabilityMatrix {
		seen[row.typ]++
		var got strings.Builder
		for _, phase := range matrixPhases {
			op := newOp("op", row.typ, row.force)
			vm := newVM(row.policy, phase)
			switch r := checkApplicable(op, vm); {
			case r == nil:
				got.WriteByte('+')
			case r.reason == vmopcondition.ReasonNotApplicableForRunPolicy:
				got.WriteByte('R')
				if !strings.Contains(r.message, "runPolicy "+string(row.policy)) {
					t.Errorf("%s %s %s: message %q does not name the run policy", row.typ, row.policy, phase, r.message)
				}
			case r.reason == vmopcondition.ReasonNotApplicableForVMPhase:
				got.WriteByte('P')
				if !strings.Contains(r.message, "in phase "+string(phase)) {
					t.Errorf("%s %s %s: message %q does not name the phase", row.typ, row.policy, phase, r.message)
				}
			default:
				t.Errorf("%s %s %s: reason %s", row.typ, row.policy, phase, r.reason)
				got.WriteByte('?')
			}
		}
		if got.String() != row.want {
			t.Errorf("%s force=%v %s: %s, want %s (phases %v)", row.typ, row.force, row.policy, got.String(), row.want, matrixPhases)
		}
	}
	for _, typ := range []v1alpha2.VMOPType{v1alpha2.VMOPTypeStart, v1alpha2.VMOPTypeStop, v1alpha2.VMOPTypeRestart, v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict} {
		if seen[typ] < 4 {
			t.Errorf("%s: %d rows, want every run policy", typ, seen[typ])
		}
	}
}

func TestDefaults(t *testing.T) {
	vm := &v1alpha2.VirtualMachine{}
	if got := RunPolicy(vm); got != v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy {
		t.Errorf("RunPolicy of an empty spec: %s", got)
	}
	if got := MachinePhase(vm); got != v1alpha2.MachinePending {
		t.Errorf("MachinePhase of an empty status: %s", got)
	}
	// A Start of a machine with no phase yet (Pending) fails for the phase.
	if r := checkApplicable(newOp("op", v1alpha2.VMOPTypeStart, false), vm); r == nil || r.reason != vmopcondition.ReasonNotApplicableForVMPhase {
		t.Errorf("Start of a Pending machine: %+v", r)
	}
}

func TestLiveMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy v1alpha2.LiveMigrationPolicy
		force  *bool
		want   string // "" runs, else a part of the message
	}{
		{"", nil, ""},
		{"", ptr.To(true), ""},
		{v1alpha2.PreferSafeMigrationPolicy, ptr.To(false), ""},
		{v1alpha2.PreferForcedMigrationPolicy, nil, ""},
		{v1alpha2.ManualMigrationPolicy, nil, ""},
		{v1alpha2.NeverMigrationPolicy, nil, "liveMigrationPolicy Never"},
		{v1alpha2.NeverMigrationPolicy, ptr.To(true), "liveMigrationPolicy Never"},
		{v1alpha2.AlwaysSafeMigrationPolicy, nil, ""},
		{v1alpha2.AlwaysSafeMigrationPolicy, ptr.To(true), "force=true is not applicable"},
		{v1alpha2.AlwaysForcedMigrationPolicy, nil, "force=true is required"},
		{v1alpha2.AlwaysForcedMigrationPolicy, ptr.To(false), "force=true is required"},
		{v1alpha2.AlwaysForcedMigrationPolicy, ptr.To(true), ""},
	} {
		for _, typ := range []v1alpha2.VMOPType{v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict} {
			op := newOp("op", typ, false)
			op.Spec.Force = tc.force
			vm := newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning)
			vm.Spec.LiveMigrationPolicy = tc.policy
			r := checkApplicable(op, vm)
			switch {
			case tc.want == "" && r != nil:
				t.Errorf("%s %q force=%v: refused: %s", typ, tc.policy, ptr.Deref(tc.force, false), r.message)
			case tc.want != "" && (r == nil || r.reason != vmopcondition.ReasonNotApplicableForLiveMigrationPolicy || !strings.Contains(r.message, tc.want)):
				t.Errorf("%s %q force=%v: %+v, want %s %q", typ, tc.policy, ptr.Deref(tc.force, false), r, vmopcondition.ReasonNotApplicableForLiveMigrationPolicy, tc.want)
			}
		}
	}
}

func TestNotMigratable(t *testing.T) {
	for _, typ := range []v1alpha2.VMOPType{v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict} {
		vm := newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning)
		vm.Status.Conditions = []metav1.Condition{{Type: "Migratable", Status: metav1.ConditionTrue}}
		if r := checkApplicable(newOp("op", typ, false), vm); r != nil {
			t.Errorf("%s of a migratable machine: %+v", typ, r)
		}
		vm.Status.Conditions[0].Status, vm.Status.Conditions[0].Message = metav1.ConditionFalse, "cannot migrate VMI: PVC root is not shared"
		r := checkApplicable(newOp("op", typ, false), vm)
		want := "Operation type " + string(typ) + " is not applicable for a VirtualMachine that cannot migrate live: cannot migrate VMI: PVC root is not shared"
		if r == nil || r.reason != vmopcondition.ReasonOperationFailed || r.message != want {
			t.Errorf("%s of a machine that cannot migrate: %+v", typ, r)
		}
	}
	// Other operations do not care.
	vm := newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning)
	vm.Status.Conditions = []metav1.Condition{{Type: "Migratable", Status: metav1.ConditionFalse}}
	if r := checkApplicable(newOp("op", v1alpha2.VMOPTypeRestart, false), vm); r != nil {
		t.Errorf("Restart: %+v", r)
	}
}

func TestCanSupersede(t *testing.T) {
	types := []struct {
		typ   v1alpha2.VMOPType
		force bool
	}{
		{v1alpha2.VMOPTypeStart, false}, {v1alpha2.VMOPTypeStop, false}, {v1alpha2.VMOPTypeStop, true},
		{v1alpha2.VMOPTypeRestart, false}, {v1alpha2.VMOPTypeRestart, true}, {v1alpha2.VMOPTypeMigrate, false}, {v1alpha2.VMOPTypeEvict, false},
	}
	// want[older] lists, per newer operation in the order of types, whether it supersedes older.
	want := []string{
		//        Start Stop Stop! Restart Restart! Migrate Evict   (newer)
		"-++++--", // Start
		"--+----", // Stop
		"-------", // Stop!
		"-++----", // Restart
		"-++----", // Restart!
		"-++----", // Migrate
		"-++----", // Evict
	}
	for i, older := range types {
		var got strings.Builder
		for _, newer := range types {
			if CanSupersede(newOp("old", older.typ, older.force), newOp("new", newer.typ, newer.force)) {
				got.WriteByte('+')
			} else {
				got.WriteByte('-')
			}
		}
		if got.String() != want[i] {
			t.Errorf("older %s force=%v: %s, want %s", older.typ, older.force, got.String(), want[i])
		}
	}
	other := newOp("new", v1alpha2.VMOPTypeStop, false)
	other.Spec.VirtualMachineName = "another"
	if CanSupersede(newOp("old", v1alpha2.VMOPTypeStart, false), other) {
		t.Error("an operation on another machine supersedes")
	}
}

func newOp(name string, typ v1alpha2.VMOPType, force bool) *v1alpha2.VirtualMachineOperation {
	op := &v1alpha2.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(t0)},
		Spec:       v1alpha2.VirtualMachineOperationSpec{Type: typ, VirtualMachineName: "vm"},
	}
	if force {
		op.Spec.Force = ptr.To(true)
	}
	return op
}

func newVM(policy v1alpha2.RunPolicy, phase v1alpha2.MachinePhase) *v1alpha2.VirtualMachine {
	return &v1alpha2.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vm-uid"},
		Spec:       v1alpha2.VirtualMachineSpec{RunPolicy: policy},
		Status:     v1alpha2.VirtualMachineStatus{Phase: phase},
	}
}
