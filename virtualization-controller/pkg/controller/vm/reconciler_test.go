package vm

import (
	"cmp"
	"context"
	"testing"
	"time"

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
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	"github.com/d8virt/virtualization-controller/pkg/fakeclient"
)

type world struct {
	t        *testing.T
	c        client.Client
	r        *Reconciler
	recorder *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	t.Helper()
	c := fakeclient.Builder(t, objs...).
		WithStatusSubresource(&v1alpha2.VirtualMachine{}, &kubevirtv1.VirtualMachine{}, &v1alpha2.VirtualDisk{}).Build()
	rec := events.NewFakeRecorder(100)
	return &world{t: t, c: c, recorder: rec,
		r: NewReconciler(c, c, clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), rec)}
}

func (w *world) reconcile() {
	w.t.Helper()
	if _, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) vm() *v1alpha2.VirtualMachine {
	w.t.Helper()
	vm := &v1alpha2.VirtualMachine{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, vm); err != nil {
		w.t.Fatal(err)
	}
	return vm
}

func (w *world) internal() *kubevirtv1.VirtualMachine {
	w.t.Helper()
	kv := &kubevirtv1.VirtualMachine{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, kv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		w.t.Fatal(err)
	}
	return kv
}

func reconcilerVM() *v1alpha2.VirtualMachine {
	vm := friendlyVM()
	vm.UID = ""
	vm.Spec.BlockDeviceRefs = vm.Spec.BlockDeviceRefs[:1]
	return vm
}

func TestReconcileCreatesAndStarts(t *testing.T) {
	vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"}}
	vmip := &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Status: v1alpha2.VirtualMachineIPAddressStatus{Address: "10.66.10.3", VirtualMachineName: "web"}}
	w := newWorld(t, reconcilerVM(), class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), vd, vmip)

	w.reconcile()
	vm := w.vm()
	if vm.Status.Phase != v1alpha2.MachinePending || !meta.IsStatusConditionFalse(vm.Status.Conditions, string(vmcondition.TypeBlockDevicesReady)) {
		t.Errorf("disk not ready: phase %s conditions %+v", vm.Status.Phase, vm.Status.Conditions)
	}
	if w.internal() != nil {
		t.Fatal("an internal VM before the disk is ready")
	}

	vd.Status = v1alpha2.VirtualDiskStatus{Phase: v1alpha2.DiskReady, Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: "root-pvc"}}
	if err := w.c.Status().Update(context.Background(), vd); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	kv := w.internal()
	if kv == nil {
		t.Fatal("no internal VM")
	}
	if got := kv.Spec.Template.ObjectMeta.Annotations[AnnotationIPAddress]; got != "10.66.10.3" {
		t.Errorf("the template asks for address %q, want the VMIP's", got)
	}
	if reqs := kv.Status.StateChangeRequests; len(reqs) != 1 || reqs[0].Action != kubevirtv1.StartRequest {
		t.Errorf("state change requests %+v, want a Start", reqs)
	}
	if got := w.vm().Status.Phase; got != v1alpha2.MachineStarting {
		t.Errorf("phase %s, want Starting", got)
	}

	// The core serves the request and runs the guest.
	kv.Status.StateChangeRequests = nil
	if err := w.c.Status().Update(context.Background(), kv); err != nil {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "vmi1", Annotations: kv.Spec.Template.ObjectMeta.Annotations},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "n1",
			Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.0.0.5"}},
			Conditions: []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}},
	}
	if err := w.c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	st := w.vm().Status
	if st.Phase != v1alpha2.MachineRunning || st.NodeName != "n1" || st.IPAddress != "10.66.10.3" || st.VirtualMachineIPAddressName != "web" || !meta.IsStatusConditionTrue(st.Conditions, string(vmcondition.TypeAgentReady)) {
		t.Errorf("running: %+v", st)
	}

	// More cores with Automatic approval: the change awaits a restart, which the controller asks for.
	vm = w.vm()
	vm.Spec.CPU.Cores = 4
	vm.Spec.Disruptions = &v1alpha2.Disruptions{RestartApprovalMode: v1alpha2.Automatic}
	if err := w.c.Update(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	st = w.vm().Status
	if len(st.RestartAwaitingChanges) != 1 || st.RestartAwaitingChanges[0].Path != "/cpu/cores" || !meta.IsStatusConditionTrue(st.Conditions, string(vmcondition.TypeAwaitingRestartToApplyConfiguration)) {
		t.Errorf("restart awaiting: %+v", st.RestartAwaitingChanges)
	}
	kv = w.internal()
	if kv.Spec.Template.Spec.Domain.CPU.Cores != 4 {
		t.Errorf("internal VM cores %d, want 4", kv.Spec.Template.Spec.Domain.CPU.Cores)
	}
	if reqs := kv.Status.StateChangeRequests; len(reqs) != 2 || reqs[0].Action != kubevirtv1.StopRequest || reqs[1].Action != kubevirtv1.StartRequest {
		t.Errorf("state change requests %+v, want a restart", reqs)
	}
}

// TestReconcileRunPolicyAtCreation: a new VM whose dependencies are ready gets its internal VM;
// AlwaysOn and AlwaysOnUnlessStoppedManually (the default) are started, Manual and AlwaysOff stay
// Stopped, however often the controller looks again, until something asks for a start.
func TestReconcileRunPolicyAtCreation(t *testing.T) {
	cases := []struct {
		policy v1alpha2.RunPolicy
		starts bool
	}{
		{v1alpha2.AlwaysOnPolicy, true},
		{v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy, true},
		{"", true},
		{v1alpha2.ManualPolicy, false},
		{v1alpha2.AlwaysOffPolicy, false},
	}
	for _, tc := range cases {
		t.Run(cmp.Or(string(tc.policy), "default"), func(t *testing.T) {
			vm := reconcilerVM()
			vm.Spec.RunPolicy = tc.policy
			vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"},
				Status: v1alpha2.VirtualDiskStatus{Phase: v1alpha2.DiskReady, Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: "root-pvc"}}}
			vmip := &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
				Status: v1alpha2.VirtualMachineIPAddressStatus{Address: "10.66.10.3", VirtualMachineName: "web"}}
			w := newWorld(t, vm, class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), vd, vmip)
			for range 3 {
				w.reconcile()
			}
			kv := w.internal()
			if kv == nil {
				t.Fatal("no internal VM")
			}
			if s := kv.Spec.RunStrategy; s == nil || *s != kubevirtv1.RunStrategyManual {
				t.Errorf("internal runStrategy %v, want Manual", s)
			}
			reqs, phase := kv.Status.StateChangeRequests, w.vm().Status.Phase
			if tc.starts {
				if len(reqs) != 1 || reqs[0].Action != kubevirtv1.StartRequest || phase != v1alpha2.MachineStarting {
					t.Errorf("state change requests %+v, phase %s; want a Start, Starting", reqs, phase)
				}
				return
			}
			if len(reqs) != 0 || phase != v1alpha2.MachineStopped {
				t.Errorf("state change requests %+v, phase %s; want none, Stopped", reqs, phase)
			}
		})
	}
}

func TestReconcileDeletion(t *testing.T) {
	vm := reconcilerVM()
	vm.Finalizers = []string{Finalizer}
	vm.UID = "u1"
	kv := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1alpha2.SchemeGroupVersion.WithKind("VirtualMachine"))}}}
	w := newWorld(t, vm, kv)
	if err := w.c.Delete(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	if w.internal() != nil {
		t.Fatal("the internal VM is still there")
	}
	if got := w.vm(); got.Status.Phase != v1alpha2.MachineTerminating {
		t.Errorf("phase %s, want Terminating", got.Status.Phase)
	}
	w.reconcile()
	err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "web"}, &v1alpha2.VirtualMachine{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the VM is kept after its internal VM went: %v", err)
	}
}

func TestSecretProblem(t *testing.T) {
	ok := &corev1.Secret{Type: v1alpha2.SecretTypeCloudInit, Data: map[string][]byte{"userData": []byte("#cloud-config")}}
	cases := []struct {
		s    *corev1.Secret
		want bool
	}{
		{nil, true}, {ok, false},
		{&corev1.Secret{Type: corev1.SecretTypeOpaque, Data: ok.Data}, true},
		{&corev1.Secret{Type: v1alpha2.SecretTypeCloudInit}, true},
	}
	for i, tc := range cases {
		if got := SecretProblem("ci", tc.s); (got != "") != tc.want {
			t.Errorf("case %d: %q", i, got)
		}
	}
}

// An internal VM of the name that the VM does not own is left alone.
func TestReconcileLeavesAForeignInternalVM(t *testing.T) {
	vm := reconcilerVM()
	vm.UID = "mine"
	foreign := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{"x": "y"}}}
	w := newWorld(t, vm, class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), foreign)
	w.reconcile()
	if got := w.internal(); got.Spec.Template != nil || got.Labels["x"] != "y" {
		t.Errorf("the foreign internal VM was changed: %+v", got)
	}
}

// TestReconcileClassChangeAwaitsRestart: a class changed under a running guest (its processor,
// or the features a Discovery class found) makes the VM await a restart, with the reference's
// message and no restartAwaitingChanges entry; with Automatic approval the controller restarts
// it; the guest started from the new class awaits nothing.
func TestReconcileClassChangeAwaitsRestart(t *testing.T) {
	ctx := context.Background()
	vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"},
		Status: v1alpha2.VirtualDiskStatus{Phase: v1alpha2.DiskReady, Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: "root-pvc"}}}
	vmip := &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Status: v1alpha2.VirtualMachineIPAddressStatus{Address: "10.66.10.3", VirtualMachineName: "web"}}
	cls := class(v1alpha2.CPU{Type: v1alpha2.CPUTypeDiscovery})
	cls.Status.CPUFeatures.Enabled = []string{"sse4.2"}
	cls.Status.Conditions = []metav1.Condition{{Type: "Discovered", Status: metav1.ConditionTrue, Reason: "DiscoverySucceeded", LastTransitionTime: metav1.Now()}}
	w := newWorld(t, reconcilerVM(), cls, vd, vmip)
	w.reconcile()
	kv := w.internal()
	if kv == nil {
		t.Fatal("no internal VM")
	}
	kv.Status.StateChangeRequests = nil
	if err := w.c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	runVMI := func(uid types.UID, annotations map[string]string) {
		t.Helper()
		_ = w.c.Delete(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: uid, Annotations: annotations},
			Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "n1"}}
		if err := w.c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	runVMI("vmi1", kv.Spec.Template.ObjectMeta.Annotations)
	w.reconcile()
	if c := meta.FindStatusCondition(w.vm().Status.Conditions, string(vmcondition.TypeAwaitingRestartToApplyConfiguration)); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("a guest of the current class awaits a restart: %+v", c)
	}

	// The nodes changed: the class found another feature set.
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(cls), cls); err != nil {
		t.Fatal(err)
	}
	cls.Status.CPUFeatures.Enabled = []string{"avx", "sse4.2"}
	if err := w.c.Update(ctx, cls); err != nil { // the fake keeps a class's status with its spec
		t.Fatal(err)
	}
	w.reconcile()
	st := w.vm().Status
	c := meta.FindStatusCondition(st.Conditions, string(vmcondition.TypeAwaitingRestartToApplyConfiguration))
	if c == nil || c.Status != metav1.ConditionTrue || c.Message != "VirtualMachineClass.spec has been modified. Waiting for the user to restart in order to apply the configuration changes." {
		t.Errorf("class changed: %+v", c)
	}
	if len(st.RestartAwaitingChanges) != 0 {
		t.Errorf("restartAwaitingChanges %+v for a class change", st.RestartAwaitingChanges)
	}
	kv = w.internal()
	if f := kv.Spec.Template.Spec.Domain.CPU.Features; len(f) != 2 {
		t.Errorf("the internal VM's features %+v, want the class's new two", f)
	}
	if reqs := kv.Status.StateChangeRequests; len(reqs) != 0 {
		t.Errorf("state change requests %+v with Manual approval", reqs)
	}

	// Automatic approval restarts the guest.
	vm := w.vm()
	vm.Spec.Disruptions = &v1alpha2.Disruptions{RestartApprovalMode: v1alpha2.Automatic}
	if err := w.c.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	kv = w.internal()
	if reqs := kv.Status.StateChangeRequests; len(reqs) != 2 || reqs[0].Action != kubevirtv1.StopRequest || reqs[1].Action != kubevirtv1.StartRequest {
		t.Errorf("state change requests %+v, want a restart", reqs)
	}

	// The guest restarted from the new class awaits nothing.
	kv.Status.StateChangeRequests = nil
	if err := w.c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	runVMI("vmi2", kv.Spec.Template.ObjectMeta.Annotations)
	w.reconcile()
	if c := meta.FindStatusCondition(w.vm().Status.Conditions, string(vmcondition.TypeAwaitingRestartToApplyConfiguration)); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("after the restart: %+v", c)
	}
}

// TestUsesOnlyItsOwnAddress: a VirtualMachineIPAddress brings back the VM whose address it is
// (by spec.virtualMachineIPAddressName, else the VM's own name), not every VM of the namespace.
func TestUsesOnlyItsOwnAddress(t *testing.T) {
	vmip := func(name string) client.Object {
		return &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	named := &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	pinned := &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: "db-static"}}
	for _, tc := range []struct {
		vm   *v1alpha2.VirtualMachine
		vmip string
		want bool
	}{
		{named, "web", true},
		{named, "db", false},
		{pinned, "db-static", true},
		{pinned, "db", false},
		{pinned, "web", false},
	} {
		if got := uses(tc.vm, "VirtualMachineIPAddress", vmip(tc.vmip)); got != tc.want {
			t.Errorf("VM %s uses address %s: %v, want %v", tc.vm.Name, tc.vmip, got, tc.want)
		}
	}
}
