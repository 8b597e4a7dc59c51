package vmip

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

func TestDecideProtection(t *testing.T) {
	deleted := metav1.NewTime(t0.Time)
	for _, tc := range []struct {
		name       string
		finalizers []string
		deleting   bool
		usedBy     string
		want       Protection
	}{
		{name: "used, not protected", usedBy: "vm", want: ProtectionAdd},
		{name: "used, protected", finalizers: []string{FinalizerProtection}, usedBy: "vm", want: ProtectionKeep},
		{name: "unused, protected", finalizers: []string{FinalizerProtection}, want: ProtectionRemove},
		{name: "unused, not protected", want: ProtectionKeep},
		{name: "deleted while used: waits", finalizers: []string{FinalizerProtection}, deleting: true, usedBy: "vm", want: ProtectionKeep},
		{name: "deleted once unused: goes", finalizers: []string{FinalizerProtection}, deleting: true, want: ProtectionRemove},
		{name: "deleted unprotected, then used: no finalizer on a deleted object", finalizers: []string{"other"}, deleting: true, usedBy: "vm", want: ProtectionKeep},
		{name: "other finalizers do not count", finalizers: []string{"other"}, usedBy: "vm", want: ProtectionAdd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := address("a", v1alpha2.VirtualMachineIPAddressTypeAuto, "", "10.66.10.5")
			v.Finalizers = tc.finalizers
			if tc.deleting {
				v.DeletionTimestamp = &deleted
			}
			if got := DecideProtection(v, tc.usedBy); got != tc.want {
				t.Fatalf("DecideProtection = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestAddressInUseIsProtected: a machine's address gets the finalizer; deleted while the
// machine uses it, it waits with Attached saying so and keeps its lease; once the machine is
// gone it goes, and its lease is released (and kept for the retention period).
func TestAddressInUseIsProtected(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	ctx := context.Background()
	vm := &v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm1"), Spec: v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: "mine"}}
	w.create(vm)
	w.create(address("mine", v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	w.settle()
	v := w.vmip("mine")
	if !strings.Contains(strings.Join(v.Finalizers, ","), FinalizerProtection) || v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseAttached {
		t.Fatalf("address in use: finalizers %v, status %+v", v.Finalizers, v.Status)
	}
	lease := "ip-" + strings.ReplaceAll(v.Status.Address, ".", "-")

	if err := w.c.Delete(ctx, v); err != nil {
		t.Fatal(err)
	}
	w.settle()
	v = w.vmip("mine")
	if v.DeletionTimestamp == nil {
		t.Fatal("not being deleted")
	}
	if c := meta.FindStatusCondition(v.Status.Conditions, string(vmipcondition.AttachedType)); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "its deletion waits") {
		t.Fatalf("Attached while the deletion waits: %+v", c)
	}
	if l, ok := w.lease(lease); !ok || !HeldBy(l, v) {
		t.Fatalf("lease while the deletion waits: %+v, %v", l, ok)
	}

	if err := w.c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	w.settle()
	if err := w.c.Get(ctx, req("ns", "mine").NamespacedName, &v1alpha2.VirtualMachineIPAddress{}); err == nil {
		t.Fatal("the address outlived its machine's deletion")
	}
	if l, ok := w.lease(lease); !ok || l.Status.Phase != v1alpha2.VirtualMachineIPAddressLeasePhaseReleased {
		t.Fatalf("lease after the address went: %+v, %v", l, ok)
	}
}

// TestAddressOutlivesItsMachine: an address a machine named is kept, unprotected and Bound,
// when the machine goes (the user's object; only the address made for a machine goes with it).
func TestAddressOutlivesItsMachine(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	vm := &v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm1"), Spec: v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: "mine"}}
	w.create(vm)
	w.create(address("mine", v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	w.settle()
	addr := w.vmip("mine").Status.Address
	if err := w.c.Delete(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	w.settle()
	v := w.vmip("mine")
	if len(v.Finalizers) != 0 || v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseBound || v.Status.Address != addr {
		t.Fatalf("address after its machine went: finalizers %v, status %+v (had %s)", v.Finalizers, v.Status, addr)
	}
}

// TestProtectionOnAStaleCache: a protection decided on an address the cache has not seen change
// sends its patch once, conflicts, and ends the reconcile without an error (the watch brings the
// newer address, decided again), so no retry piles up conflicting writes; the next look adds it.
func TestProtectionOnAStaleCache(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	ctx := context.Background()
	w.create(&v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm1"), Spec: v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: "mine"}})
	w.create(address("mine", v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	stale := w.vmip("mine")
	fresh := stale.DeepCopy()
	fresh.Labels = map[string]string{"changed": "since"}
	if err := w.c.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	patches := 0
	lagging := interceptor.NewClient(w.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if v, ok := obj.(*v1alpha2.VirtualMachineIPAddress); ok && key.Name == "mine" {
				stale.DeepCopyInto(v)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, p, opts...)
		},
	})
	rng, err := ipam.ParseRange([]string{"10.66.10.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	r := NewAddressReconciler(lagging, lagging, rng, w.clock, w.recorder)
	if _, err := r.Reconcile(ctx, req("ns", "mine")); err != nil {
		t.Fatalf("a reconcile on the stale address: %v", err)
	}
	if patches != 1 {
		t.Errorf("%d patches, want the one that conflicted", patches)
	}
	if f := w.vmip("mine").Finalizers; len(f) != 0 {
		t.Errorf("finalizers %v written over the newer address", f)
	}
	w.settle()
	if f := w.vmip("mine").Finalizers; !strings.Contains(strings.Join(f, ","), FinalizerProtection) {
		t.Errorf("finalizers %v after the next look, want the protection", f)
	}
}
