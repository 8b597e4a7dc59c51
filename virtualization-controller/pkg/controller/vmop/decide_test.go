package vmop

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// op builds an operation with the finalizer, created at t0 plus age seconds.
func op(name string, typ v1alpha2.VMOPType, age int, mods ...func(*v1alpha2.VirtualMachineOperation)) *v1alpha2.VirtualMachineOperation {
	o := newOp(name, typ, false)
	o.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(age) * time.Second))
	o.Finalizers = []string{Finalizer}
	for _, m := range mods {
		m(o)
	}
	return o
}

func forced(o *v1alpha2.VirtualMachineOperation) { t := true; o.Spec.Force = &t }

func phase(p v1alpha2.VMOPPhase) func(*v1alpha2.VirtualMachineOperation) {
	return func(o *v1alpha2.VirtualMachineOperation) { o.Status.Phase = p }
}

// sent marks the signal as sent at t0 plus s seconds, the operation InProgress.
func sent(s int) func(*v1alpha2.VirtualMachineOperation) {
	return func(o *v1alpha2.VirtualMachineOperation) {
		o.Status.Phase = v1alpha2.VMOPPhaseInProgress
		meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{Type: string(vmopcondition.TypeSignalSent), Status: metav1.ConditionTrue,
			Reason: string(vmopcondition.ReasonSignalSentSuccess), LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(s) * time.Second))})
	}
}

func noFinalizer(o *v1alpha2.VirtualMachineOperation) { o.Finalizers = nil }

func deleted(o *v1alpha2.VirtualMachineOperation) {
	now := metav1.NewTime(t0)
	o.DeletionTimestamp = &now
}

func vmi(p kubevirtv1.VirtualMachineInstancePhase, createdAt int) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: types.UID("vmi-" + string(p)), CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(createdAt) * time.Second))},
		Status:     kubevirtv1.VirtualMachineInstanceStatus{Phase: p},
	}
}

func migration(p kubevirtv1.VirtualMachineInstanceMigrationPhase, mods ...func(*kubevirtv1.VirtualMachineInstanceMigration)) *kubevirtv1.VirtualMachineInstanceMigration {
	m := &kubevirtv1.VirtualMachineInstanceMigration{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vmop-op", UID: "mig"}}
	m.Status.Phase = p
	for _, f := range mods {
		f(m)
	}
	return m
}

func TestDecide(t *testing.T) {
	running := newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning)
	stopped := newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStopped)
	alwaysOff := newVM(v1alpha2.AlwaysOffPolicy, v1alpha2.MachineStopped)
	for _, tc := range []struct {
		name     string
		in       Inputs
		step     Step
		phase    v1alpha2.VMOPPhase
		reason   vmopcondition.ReasonCompleted // of Completed; "" for none
		message  string                        // part of Completed's message
		progress string
	}{
		{name: "new: finalizer first", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, noFinalizer), VM: stopped}, step: StepAddFinalizer},
		{name: "start a stopped VM", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0), VM: stopped}, step: StepExecute,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "start a running VM fails for its phase", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0), VM: running, VMI: vmi(kubevirtv1.Running, -60)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonNotApplicableForVMPhase, message: "Operation type Start is not applicable for VirtualMachine in phase Running"},
		{name: "AlwaysOff refuses start", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0), VM: alwaysOff}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonNotApplicableForRunPolicy, message: "runPolicy AlwaysOff"},
		{name: "no VM", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 0)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonVirtualMachineNotFound, message: "VirtualMachine vm not found"},
		{name: "start in progress, no VMI yet", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, sent(1)), VM: stopped}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "start in progress, VMI scheduling", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, sent(1)), VM: stopped, VMI: vmi(kubevirtv1.Scheduling, 2)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "start of a stopping VM in progress: the old VMI still runs", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, sent(10)), VM: stopped, VMI: vmi(kubevirtv1.Running, -60)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "start done: VMI running", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, sent(1)), VM: stopped, VMI: vmi(kubevirtv1.Running, 2)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseCompleted, reason: vmopcondition.ReasonOperationCompleted},
		{name: "start failed: VMI failed", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, sent(1)), VM: stopped, VMI: vmi(kubevirtv1.Failed, 2)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonOperationFailed, message: "failed to start"},
		{name: "stop a running VM", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 0), VM: running, VMI: vmi(kubevirtv1.Running, -60)}, step: StepExecute,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "stop in progress: VMI still there", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 0, sent(1)), VM: running, VMI: vmi(kubevirtv1.Running, -60)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "stop done: no VMI", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 0, sent(1)), VM: running}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseCompleted, reason: vmopcondition.ReasonOperationCompleted},
		{name: "graceful stop of a stopping VM fails", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 0), VM: newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStopping)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonNotApplicableForVMPhase},
		{name: "forced stop of a stopping VM runs", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 0, forced), VM: newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStopping)}, step: StepExecute,
			phase: v1alpha2.VMOPPhaseInProgress},
		{name: "restart in progress: the old VMI runs", in: Inputs{Op: op("op", v1alpha2.VMOPTypeRestart, 0, sent(10)), VM: running, VMI: vmi(kubevirtv1.Running, -60)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonOperationInProgress},
		{name: "restart done: a new VMI runs", in: Inputs{Op: op("op", v1alpha2.VMOPTypeRestart, 0, sent(10)), VM: running, VMI: vmi(kubevirtv1.Running, 12)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseCompleted, reason: vmopcondition.ReasonOperationCompleted},
		{name: "migrate a running VM", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0), VM: running, VMI: vmi(kubevirtv1.Running, -60)}, step: StepExecute,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonMigrationPending, progress: "0%"},
		{name: "evict a stopped VM fails", in: Inputs{Op: op("op", v1alpha2.VMOPTypeEvict, 0), VM: stopped}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonNotApplicableForVMPhase},
		{name: "migration scheduling", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0, sent(1)), VM: running, Migration: migration(kubevirtv1.MigrationScheduling)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonMigrationPending, message: "Scheduling", progress: "2%"},
		{name: "migration found before the status said so", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0), VM: running, Migration: migration(kubevirtv1.MigrationPending)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonMigrationPending, progress: "1%"},
		{name: "migration running 30 s", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0, sent(1)), VM: running, Now: t0.Add(40 * time.Second), Migration: migration(kubevirtv1.MigrationRunning,
			func(m *kubevirtv1.VirtualMachineInstanceMigration) {
				m.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{StartTimestamp: &metav1.Time{Time: t0.Add(10 * time.Second)}}
			})}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress, reason: vmopcondition.ReasonMigrationRunning, progress: "50%"},
		{name: "migration succeeded", in: Inputs{Op: op("op", v1alpha2.VMOPTypeEvict, 0, sent(1)), VM: running, Migration: migration(kubevirtv1.MigrationSucceeded)}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseCompleted, reason: vmopcondition.ReasonOperationCompleted, progress: "100%"},
		{name: "migration failed", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0, sent(1)), VM: running, Migration: migration(kubevirtv1.MigrationFailed,
			func(m *kubevirtv1.VirtualMachineInstanceMigration) {
				m.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{FailureReason: "target pod unschedulable"}
			})}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonOperationFailed, message: "Migration failed: target pod unschedulable"},
		{name: "migration gone", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0, sent(1)), VM: running}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseFailed, reason: vmopcondition.ReasonOperationFailed, message: "vmop-op is gone"},
		{name: "a newer op waits for an older one", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 5), VM: running,
			Others: []v1alpha2.VirtualMachineOperation{*op("first", v1alpha2.VMOPTypeRestart, 1, sent(1))}}, step: StepStatus,
			phase: v1alpha2.VMOPPhasePending, reason: vmopcondition.ReasonOtherOperationsAreInProgress, message: "first (Restart)"},
		{name: "a finished older op does not block", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 5), VM: running,
			Others: []v1alpha2.VirtualMachineOperation{*op("first", v1alpha2.VMOPTypeRestart, 1, phase(v1alpha2.VMOPPhaseCompleted))}}, step: StepExecute,
			phase: v1alpha2.VMOPPhaseInProgress},
		{name: "a newer op does not block", in: Inputs{Op: op("op", v1alpha2.VMOPTypeRestart, 1), VM: running,
			Others: []v1alpha2.VirtualMachineOperation{*op("later", v1alpha2.VMOPTypeMigrate, 5)}}, step: StepExecute,
			phase: v1alpha2.VMOPPhaseInProgress},
		{name: "a newer stop supersedes a running migration", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 1, sent(1)), VM: running, Migration: migration(kubevirtv1.MigrationRunning),
			Others: []v1alpha2.VirtualMachineOperation{*op("halt", v1alpha2.VMOPTypeStop, 5)}}, step: StepCancel,
			phase: v1alpha2.VMOPPhaseSuperseded, reason: vmopcondition.ReasonSuperseded, message: "Superseded by halt with type Stop"},
		{name: "a newer forced stop supersedes a pending stop", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStop, 1, phase(v1alpha2.VMOPPhasePending)), VM: running,
			Others: []v1alpha2.VirtualMachineOperation{*op("kill", v1alpha2.VMOPTypeStop, 5, forced)}}, step: StepCancel,
			phase: v1alpha2.VMOPPhaseSuperseded, reason: vmopcondition.ReasonSuperseded},
		{name: "the superseding stop waits until the older op is superseded", in: Inputs{Op: op("kill", v1alpha2.VMOPTypeStop, 5, forced), VM: running,
			Others: []v1alpha2.VirtualMachineOperation{*op("op", v1alpha2.VMOPTypeStop, 1, sent(1))}}, step: StepStatus,
			phase: v1alpha2.VMOPPhasePending, reason: vmopcondition.ReasonOtherOperationsAreInProgress},
		{name: "in the same second, the operation under way is the older", in: Inputs{Op: op("start", v1alpha2.VMOPTypeStart, 1, sent(1)), VM: stopped,
			Others: []v1alpha2.VirtualMachineOperation{*op("halt", v1alpha2.VMOPTypeStop, 1)}}, step: StepCancel,
			phase: v1alpha2.VMOPPhaseSuperseded, reason: vmopcondition.ReasonSuperseded, message: "Superseded by halt"},
		{name: "in the same second, the newer one waits", in: Inputs{Op: op("halt", v1alpha2.VMOPTypeStop, 1), VM: running,
			Others: []v1alpha2.VirtualMachineOperation{*op("start", v1alpha2.VMOPTypeStart, 1, sent(1))}}, step: StepStatus,
			phase: v1alpha2.VMOPPhasePending, reason: vmopcondition.ReasonOtherOperationsAreInProgress, message: "start (Start)"},
		{name: "an older start is not superseded by a migrate", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 1, sent(1)), VM: stopped,
			Others: []v1alpha2.VirtualMachineOperation{*op("later", v1alpha2.VMOPTypeMigrate, 5)}}, step: StepStatus,
			phase: v1alpha2.VMOPPhaseInProgress},
		{name: "finished: the finalizer goes", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, phase(v1alpha2.VMOPPhaseCompleted)), VM: stopped}, step: StepRemoveFinalizer,
			phase: v1alpha2.VMOPPhaseCompleted},
		{name: "finished without finalizer", in: Inputs{Op: op("op", v1alpha2.VMOPTypeStart, 0, phase(v1alpha2.VMOPPhaseFailed), noFinalizer)}, step: StepNone,
			phase: v1alpha2.VMOPPhaseFailed},
		{name: "deleted while migrating: cancel", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0, sent(1), deleted), VM: running, Migration: migration(kubevirtv1.MigrationRunning)}, step: StepCancel,
			phase: v1alpha2.VMOPPhaseTerminating},
		{name: "deleted, nothing runs", in: Inputs{Op: op("op", v1alpha2.VMOPTypeMigrate, 0, sent(1), deleted), VM: running, Migration: migration(kubevirtv1.MigrationFailed)}, step: StepRemoveFinalizer,
			phase: v1alpha2.VMOPPhaseInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Now.IsZero() {
				tc.in.Now = t0.Add(20 * time.Second)
			}
			d := Decide(tc.in)
			if d.Step != tc.step {
				t.Errorf("step %s, want %s", d.Step, tc.step)
			}
			if d.Status.Phase != tc.phase {
				t.Errorf("phase %q, want %q", d.Status.Phase, tc.phase)
			}
			c := meta.FindStatusCondition(d.Status.Conditions, string(vmopcondition.TypeCompleted))
			switch {
			case tc.reason != "" && (c == nil || c.Reason != string(tc.reason)):
				t.Errorf("Completed %+v, want reason %s", c, tc.reason)
			case tc.message != "" && (c == nil || !strings.Contains(c.Message, tc.message)):
				t.Errorf("Completed message %q, want it to hold %q", c.Message, tc.message)
			}
			if c != nil && (c.Status == metav1.ConditionTrue) != (d.Status.Phase == v1alpha2.VMOPPhaseCompleted || d.Status.Phase == v1alpha2.VMOPPhaseSuperseded) {
				t.Errorf("Completed is %s in phase %s", c.Status, d.Status.Phase)
			}
			if tc.progress != "" && d.Status.Progress != tc.progress {
				t.Errorf("progress %q, want %q", d.Status.Progress, tc.progress)
			}
			if d.Step == StepExecute && !meta.IsStatusConditionTrue(d.Status.Conditions, string(vmopcondition.TypeSignalSent)) {
				t.Errorf("executed without SignalSent: %+v", d.Status.Conditions)
			}
			if d.Status.ObservedGeneration != tc.in.Op.Generation {
				t.Errorf("observedGeneration %d", d.Status.ObservedGeneration)
			}
		})
	}
}

// A Decide on its own output changes nothing: the status converges.
func TestDecideIsStable(t *testing.T) {
	o := op("op", v1alpha2.VMOPTypeStart, 0, sent(1))
	in := Inputs{Op: o, VM: newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStarting), VMI: vmi(kubevirtv1.Scheduling, 2), Now: t0.Add(5 * time.Second)}
	first := Decide(in)
	o.Status = first.Status
	in.Now = t0.Add(9 * time.Second)
	second := Decide(in)
	if !equalStatus(first.Status, second.Status) {
		t.Errorf("status changed on a second look:\n%+v\n%+v", first.Status, second.Status)
	}
}

func equalStatus(a, b v1alpha2.VirtualMachineOperationStatus) bool {
	if a.Phase != b.Phase || a.Progress != b.Progress || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i] != b.Conditions[i] {
			return false
		}
	}
	return true
}

func TestSignalFailed(t *testing.T) {
	st := SignalFailed(op("op", v1alpha2.VMOPTypeStart, 0), errNoInternalVM, t0)
	c := meta.FindStatusCondition(st.Conditions, string(vmopcondition.TypeCompleted))
	s := meta.FindStatusCondition(st.Conditions, string(vmopcondition.TypeSignalSent))
	if st.Phase != v1alpha2.VMOPPhaseFailed || c == nil || c.Reason != string(vmopcondition.ReasonOperationFailed) || !strings.Contains(c.Message, "internal VirtualMachine does not exist") ||
		s == nil || s.Status != metav1.ConditionFalse || s.Reason != string(vmopcondition.ReasonSignalSentError) {
		t.Errorf("%+v", st)
	}
}

func TestPhaseValues(t *testing.T) {
	for _, tc := range []struct {
		op   *v1alpha2.VirtualMachineOperation
		want v1alpha2.VMOPPhase
	}{
		{op("a", v1alpha2.VMOPTypeStart, 0), v1alpha2.VMOPPhasePending},
		{op("a", v1alpha2.VMOPTypeStart, 0, sent(1)), v1alpha2.VMOPPhaseInProgress},
		{op("a", v1alpha2.VMOPTypeStart, 0, phase(v1alpha2.VMOPPhaseSuperseded)), v1alpha2.VMOPPhaseSuperseded},
		{op("a", v1alpha2.VMOPTypeStart, 0, phase(v1alpha2.VMOPPhaseCompleted), deleted), v1alpha2.VMOPPhaseTerminating},
	} {
		got := phasegauge.Values(Phases, GaugePhase(tc.op))
		if len(got) != len(Phases) {
			t.Errorf("%d series, want %d", len(got), len(Phases))
		}
		for p, v := range got {
			if (p == tc.want) != (v == 1) {
				t.Errorf("phase %s: %s=%v", tc.want, p, v)
			}
		}
	}
}
