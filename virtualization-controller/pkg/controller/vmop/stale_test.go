package vmop

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
)

// staleCache is a cache that has not seen the operation's last writes: it returns op for it.
type staleCache struct {
	client.Client
	op *v1alpha2.VirtualMachineOperation
}

func (s staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if o, ok := obj.(*v1alpha2.VirtualMachineOperation); ok && key == client.ObjectKeyFromObject(s.op) {
		s.op.DeepCopyInto(o)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestReconcileOnAStaleCache replays what the vmop e2e saw on the chart: the Start's signal went
// out and its status said InProgress, then a reconcile on a cache still holding the operation
// without a status decided again. Seeing the machine Starting (from the signal) it must not
// overwrite InProgress with Failed; seeing it still Stopped it must not send a second Start.
func TestReconcileOnAStaleCache(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cachedPhase v1alpha2.MachinePhase
	}{
		{"the machine already Starting", v1alpha2.MachineStarting},
		{"the machine still Stopped", v1alpha2.MachineStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, newVM(v1alpha2.ManualPolicy, v1alpha2.MachineStopped), internalVM(kubevirtv1.RunStrategyManual))
			w.create(newOp("start", v1alpha2.VMOPTypeStart, false))
			ctx := context.Background()
			req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "start"}}
			if _, err := w.r.Reconcile(ctx, req); err != nil { // the finalizer
				t.Fatal(err)
			}
			stale := &v1alpha2.VirtualMachineOperation{}
			if err := w.c.Get(ctx, req.NamespacedName, stale); err != nil {
				t.Fatal(err)
			}
			expect(t, w.settle("start"), v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonOperationInProgress)

			vm := &v1alpha2.VirtualMachine{}
			if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "vm"}, vm); err != nil {
				t.Fatal(err)
			}
			vm.Status.Phase = tc.cachedPhase
			if err := w.c.Status().Update(ctx, vm); err != nil {
				t.Fatal(err)
			}
			lagging := NewReconciler(staleCache{Client: w.c, op: stale}, w.c, w.clock, w.recorder)
			if _, err := lagging.Reconcile(ctx, req); err != nil && !apierrors.IsConflict(err) {
				t.Fatalf("reconcile on the stale cache: %v", err)
			}

			got := &v1alpha2.VirtualMachineOperation{}
			if err := w.c.Get(ctx, req.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			expect(t, got, v1alpha2.VMOPPhaseInProgress, vmopcondition.ReasonOperationInProgress)
			kvvm := &kubevirtv1.VirtualMachine{}
			if err := w.c.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "vm"}, kvvm); err != nil {
				t.Fatal(err)
			}
			if r := kvvm.Status.StateChangeRequests; len(r) != 1 {
				t.Errorf("stateChangeRequests %+v, want the one Start", r)
			}
		})
	}
}
