package vmop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
	"github.com/d8virt/virtualization-controller/pkg/fakeclient"
)

// world is a fake API with the friendly and internal objects and a Reconciler on it.
type world struct {
	t        *testing.T
	c        client.Client
	r        *Reconciler
	clock    *clocktesting.FakeClock
	recorder *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	c := fakeclient.Builder(t, objs...).
		WithStatusSubresource(&v1alpha2.VirtualMachineOperation{}, &v1alpha2.VirtualMachine{}, &kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}, &kubevirtv1.VirtualMachineInstanceMigration{}).
		WithIndex(&v1alpha2.VirtualMachineOperation{}, IndexVirtualMachineName, IndexByVirtualMachineName).
		Build()
	clk := clocktesting.NewFakeClock(t0)
	rec := events.NewFakeRecorder(50)
	return &world{t: t, c: c, r: NewReconciler(c, c, clk, rec), clock: clk, recorder: rec}
}

// settle reconciles the operation until a reconcile changes nothing, and returns it.
func (w *world) settle(name string) *v1alpha2.VirtualMachineOperation {
	w.t.Helper()
	ctx := context.Background()
	var last string
	for i := 0; i < 10; i++ {
		if _, err := w.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}); err != nil {
			w.t.Fatalf("reconcile %s: %v", name, err)
		}
		op := &v1alpha2.VirtualMachineOperation{}
		if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, op); err != nil {
			w.t.Fatal(err)
		}
		if op.ResourceVersion == last {
			return op
		}
		last = op.ResourceVersion
	}
	w.t.Fatalf("%s does not settle", name)
	return nil
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.c.Create(context.Background(), obj); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) setVMI(vmi *kubevirtv1.VirtualMachineInstance) {
	w.t.Helper()
	ctx := context.Background()
	cur := &kubevirtv1.VirtualMachineInstance{}
	err := w.c.Get(ctx, client.ObjectKeyFromObject(vmi), cur)
	if apierrors.IsNotFound(err) {
		w.create(vmi.DeepCopy())
		cur = vmi.DeepCopy()
		_ = w.c.Get(ctx, client.ObjectKeyFromObject(vmi), cur)
	} else if err != nil {
		w.t.Fatal(err)
	}
	cur.Status = vmi.Status
	if err := w.c.Status().Update(ctx, cur); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) events() string {
	var all []string
	for {
		select {
		case e := <-w.recorder.Events:
			all = append(all, e)
		default:
			return strings.Join(all, "\n")
		}
	}
}

func expect(t *testing.T, op *v1alpha2.VirtualMachineOperation, phase v1alpha2.VMOPPhase, reason vmopcondition.ReasonCompleted) {
	t.Helper()
	c := meta.FindStatusCondition(op.Status.Conditions, string(vmopcondition.TypeCompleted))
	if op.Status.Phase != phase || c == nil || c.Reason != string(reason) {
		t.Fatalf("%s: phase %s, Completed %+v; want %s, %s", op.Name, op.Status.Phase, c, phase, reason)
	}
}

func internalVM(policy kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}, Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &policy}}
}

func TestReconcileStart(t *testing.T) {
	w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStopped), internalVM(kubevirtv1.RunStrategyManual))
	o := newOp("start", v1alpha2.VMOPTypeStart, false)
	w.create(o)
	got := w.settle("start")
	expect(t, got, v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonOperationInProgress)
	kvvm := &kubevirtv1.VirtualMachine{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "vm"}, kvvm); err != nil {
		t.Fatal(err)
	}
	if r := kvvm.Status.StateChangeRequests; len(r) != 1 || r[0].Action != kubevirtv1.StartRequest {
		t.Fatalf("stateChangeRequests %+v, want one Start", r)
	}
	w.setVMI(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", CreationTimestamp: metav1.NewTime(t0)}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}})
	got = w.settle("start")
	expect(t, got, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	if len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v left on a finished operation", got.Finalizers)
	}
	ev := w.events()
	for _, want := range []string{"Normal Start Start initiated with VirtualMachineOperation start", "Normal InProgress Phase InProgress", "Normal Completed Phase Completed"} {
		if !strings.Contains(ev, want) {
			t.Errorf("no event %q in\n%s", want, ev)
		}
	}
}

func TestReconcileStartOfARunningVMFails(t *testing.T) {
	w := newWorld(t, newVM(v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, v1alpha2.MachineRunning), internalVM(kubevirtv1.RunStrategyManual))
	w.create(newOp("start", v1alpha2.VMOPTypeStart, false))
	got := w.settle("start")
	expect(t, got, v1alpha2.VMOPPhaseFailed, vmopcondition.ReasonNotApplicableForVMPhase)
	if ev := w.events(); !strings.Contains(ev, "Warning Failed Phase Failed: Operation type Start is not applicable for VirtualMachine in phase Running") {
		t.Errorf("events:\n%s", ev)
	}
	kvvm := &kubevirtv1.VirtualMachine{}
	_ = w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "vm"}, kvvm)
	if len(kvvm.Status.StateChangeRequests) != 0 {
		t.Errorf("a refused Start sent %+v", kvvm.Status.StateChangeRequests)
	}
}

func TestReconcileStartWithoutInternalVM(t *testing.T) {
	w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStopped))
	w.create(newOp("start", v1alpha2.VMOPTypeStart, false))
	got := w.settle("start")
	expect(t, got, v1alpha2.VMOPPhaseFailed, vmopcondition.ReasonOperationFailed)
	if s := meta.FindStatusCondition(got.Status.Conditions, string(vmopcondition.TypeSignalSent)); s == nil || s.Reason != string(vmopcondition.ReasonSignalSentError) {
		t.Errorf("SignalSent %+v", s)
	}
}

func TestReconcileForcedStop(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-vm-abcde", Labels: map[string]string{kubevirtv1.CreatedByLabel: "vmi-1"}}}
	bystander := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", Labels: map[string]string{kubevirtv1.CreatedByLabel: "vmi-2"}}}
	w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning), internalVM(kubevirtv1.RunStrategyManual), vmi, launcher, bystander)
	w.create(newOp("kill", v1alpha2.VMOPTypeStop, true))
	got := w.settle("kill")
	expect(t, got, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	ctx := context.Background()
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(vmi), &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("VMI still there: %v", err)
	}
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(launcher), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("launcher pod still there: %v", err)
	}
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(bystander), &corev1.Pod{}); err != nil {
		t.Errorf("another VMI's pod: %v", err)
	}
}

func TestReconcileRestart(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	w := newWorld(t, newVM(v1alpha2.AlwaysOnPolicy, v1alpha2.MachineRunning), internalVM(kubevirtv1.RunStrategyManual), vmi)
	w.create(newOp("again", v1alpha2.VMOPTypeRestart, false))
	got := w.settle("again")
	expect(t, got, v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonOperationInProgress)
	kvvm := &kubevirtv1.VirtualMachine{}
	_ = w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "vm"}, kvvm)
	r := kvvm.Status.StateChangeRequests
	if len(r) != 2 || r[0].Action != kubevirtv1.StopRequest || r[0].UID == nil || *r[0].UID != "vmi-1" || r[1].Action != kubevirtv1.StartRequest {
		t.Fatalf("stateChangeRequests %+v, want Stop of vmi-1 and Start", r)
	}
	// The old VMI is replaced by one created after the signal.
	ctx := context.Background()
	old := &kubevirtv1.VirtualMachineInstance{}
	_ = w.c.Get(ctx, client.ObjectKeyFromObject(vmi), old)
	if err := w.c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(5 * time.Second)
	w.setVMI(&kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", CreationTimestamp: metav1.NewTime(t0.Add(5 * time.Second))}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}})
	expect(t, w.settle("again"), v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
}

func TestReconcileMigrate(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning), internalVM(kubevirtv1.RunStrategyManual), vmi)
	w.create(newOp("move", v1alpha2.VMOPTypeEvict, false))
	got := w.settle("move")
	expect(t, got, v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonMigrationPending)
	ctx := context.Background()
	mig := &kubevirtv1.VirtualMachineInstanceMigration{}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "vmop-move"}, mig); err != nil {
		t.Fatal(err)
	}
	if mig.Spec.VMIName != "vm" || !metav1.IsControlledBy(mig, got) || mig.Labels[LabelOperationType] != "Evict" {
		t.Fatalf("migration %+v", mig)
	}
	mig.Status.Phase = kubevirtv1.MigrationRunning
	mig.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{StartTimestamp: &metav1.Time{Time: t0}}
	if err := w.c.Status().Update(ctx, mig); err != nil {
		t.Fatal(err)
	}
	w.clock.Step(30 * time.Second)
	got = w.settle("move")
	expect(t, got, v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonMigrationRunning)
	if got.Status.Progress != "50%" {
		t.Errorf("progress %q after 30 s of copying", got.Status.Progress)
	}
	mig.Status.Phase = kubevirtv1.MigrationSucceeded
	if err := w.c.Status().Update(ctx, mig); err != nil {
		t.Fatal(err)
	}
	got = w.settle("move")
	expect(t, got, v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
	if got.Status.Progress != "100%" {
		t.Errorf("progress %q", got.Status.Progress)
	}
}

// A Stop created while a Migrate runs supersedes it: the migration is deleted (aborted), the
// Migrate is Superseded, and then the Stop runs.
func TestReconcileSupersede(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning), internalVM(kubevirtv1.RunStrategyManual), vmi)
	w.create(newOp("move", v1alpha2.VMOPTypeMigrate, false))
	expect(t, w.settle("move"), v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonMigrationPending)

	w.clock.Step(time.Second)
	stop := newOp("stop", v1alpha2.VMOPTypeStop, false)
	stop.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
	w.create(stop)
	expect(t, w.settle("stop"), v1alpha2.VMOPPhasePending, vmopcondition.ReasonOtherOperationsAreInProgress)
	moved := w.settle("move")
	expect(t, moved, v1alpha2.VMOPPhaseSuperseded, vmopcondition.ReasonSuperseded)
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "vmop-move"}, &kubevirtv1.VirtualMachineInstanceMigration{}); !apierrors.IsNotFound(err) {
		t.Errorf("the superseded operation's migration is still there: %v", err)
	}
	expect(t, w.settle("stop"), v1alpha2.VMOPPhaseCompleted, vmopcondition.ReasonOperationCompleted)
}

func TestReconcileVirtualMachineNotFound(t *testing.T) {
	w := newWorld(t)
	w.create(newOp("lost", v1alpha2.VMOPTypeRestart, false))
	expect(t, w.settle("lost"), v1alpha2.VMOPPhaseFailed, vmopcondition.ReasonVirtualMachineNotFound)
}

// Deleting an operation whose migration runs cancels the migration before it goes.
func TestReconcileDeleteCancelsMigration(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-1", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineRunning), internalVM(kubevirtv1.RunStrategyManual), vmi)
	w.create(newOp("move", v1alpha2.VMOPTypeMigrate, false))
	op := w.settle("move")
	ctx := context.Background()
	if err := w.c.Delete(ctx, op); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "move"}}
	for i := 0; i < 3; i++ {
		if _, err := w.r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.c.Get(ctx, req.NamespacedName, &v1alpha2.VirtualMachineOperation{}); !apierrors.IsNotFound(err) {
		t.Errorf("operation still there: %v", err)
	}
	if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "vmop-move"}, &kubevirtv1.VirtualMachineInstanceMigration{}); !apierrors.IsNotFound(err) {
		t.Errorf("migration still there: %v", err)
	}
}

// The phase gauge, gathered as Prometheus does, has a series per operation and phase.
func TestPhaseCollector(t *testing.T) {
	w := newWorld(t, newVM(v1alpha2.AlwaysOffPolicy, v1alpha2.MachineStopped))
	w.create(newOp("refused", v1alpha2.VMOPTypeStart, false))
	w.settle("refused")
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewPhaseCollector(w.c)); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != MetricStatusPhase || len(families[0].GetMetric()) != len(Phases) {
		t.Fatalf("families %v", families)
	}
	for _, m := range families[0].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["namespace"] != "ns" || l["name"] != "refused" {
			t.Errorf("labels %v", l)
		}
		if want := l["phase"] == string(v1alpha2.VMOPPhaseFailed); (m.GetGauge().GetValue() == 1) != want {
			t.Errorf("phase %s = %v", l["phase"], m.GetGauge().GetValue())
		}
	}
}
