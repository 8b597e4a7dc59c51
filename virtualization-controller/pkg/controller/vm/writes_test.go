package vm

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// TestWritesPerStart counts the API writes the controller makes for one start of a new VM (its
// class, disk and address ready, the finalizer put on by the defaulting webhook), from creation
// to Running, while the test plays the core: at most 4 (the internal VM, its start request, the
// status Starting, the status Running). Events are not counted. The guest agent's answer later
// costs one status write more.
func TestWritesPerStart(t *testing.T) {
	vm := reconcilerVM()
	vm.Finalizers = []string{Finalizer}
	vd := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "root"},
		Status: v1alpha2.VirtualDiskStatus{Phase: v1alpha2.DiskReady, Target: v1alpha2.DiskTarget{PersistentVolumeClaimName: "root-pvc"}}}
	vmip := &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Status: v1alpha2.VirtualMachineIPAddressStatus{Address: "10.66.10.3", VirtualMachineName: "web"}}
	w := newWorld(t, vm, class(v1alpha2.CPU{Type: v1alpha2.CPUTypeHost}), vd, vmip)
	core := w.c.(client.WithWatch)
	var writes []string
	count := func(verb string, obj client.Object, sub string) {
		writes = append(writes, fmt.Sprintf("%s %T%s", verb, obj, sub))
	}
	counted := interceptor.NewClient(core, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count("create", obj, "")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count("update", obj, "")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			count("patch", obj, "")
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count("delete", obj, "")
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			count("update", obj, "/"+sub)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count("patch", obj, "/"+sub)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	w.r = NewReconciler(counted, counted, clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), w.recorder)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	reconcile := func(times int) {
		t.Helper()
		for range times {
			w.reconcile()
		}
	}

	reconcile(2)
	kv := &kubevirtv1.VirtualMachine{}
	if err := core.Get(ctx, key, kv); err != nil {
		t.Fatal(err)
	}
	// The core serves the start request: the VMI is scheduled, then runs.
	kv.Status.StateChangeRequests = nil
	if err := core.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "vmi1", Annotations: kv.Spec.Template.ObjectMeta.Annotations},
		Spec:   kv.Spec.Template.Spec,
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduling}}
	if err := core.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	reconcile(2)
	vmi.Status.Phase, vmi.Status.NodeName = kubevirtv1.Running, "n1"
	if err := core.Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	reconcile(2)
	got := &v1alpha2.VirtualMachine{}
	if err := core.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha2.MachineRunning {
		t.Fatalf("phase %s, want Running", got.Status.Phase)
	}
	t.Logf("%d writes from creation to Running: %v", len(writes), writes)
	if len(writes) > 4 {
		t.Errorf("%d writes per start, want at most 4: %v", len(writes), writes)
	}

	// The agent answers: one status write.
	before := len(writes)
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}
	if err := core.Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	reconcile(2)
	if n := len(writes) - before; n != 1 {
		t.Errorf("%d writes for the agent's answer, want 1: %v", n, writes[before:])
	}
	if err := core.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if d := got.Status.Stats.LaunchTimeDuration; d.VirtualMachineStarting == nil || d.GuestOSAgentStarting == nil {
		t.Errorf("launch durations %+v", d)
	}
}
