package vmip

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

type world struct {
	t        *testing.T
	c        client.Client
	clock    *clocktesting.FakeClock
	addrs    *AddressReconciler
	leases   *LeaseReconciler
	vms      *MachineReconciler
	recorder *events.FakeRecorder
}

func newWorld(t *testing.T, cidrs ...string) *world {
	scheme := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1alpha2.VirtualMachineIPAddress{}, &v1alpha2.VirtualMachineIPAddressLease{}).
		WithIndex(&v1alpha2.VirtualMachineIPAddressLease{}, IndexLeaseByRef, IndexLease).
		Build()
	rng, err := ipam.ParseRange(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0.Time)
	rec := events.NewFakeRecorder(100)
	return &world{t: t, c: c, clock: clk, recorder: rec,
		addrs:  NewAddressReconciler(c, c, rng, clk, rec),
		leases: NewLeaseReconciler(c, c, 10*time.Minute, clk, rec),
		vms:    NewMachineReconciler(c),
	}
}

func (w *world) create(o client.Object) {
	w.t.Helper()
	if err := w.c.Create(context.Background(), o); err != nil {
		w.t.Fatal(err)
	}
}

// settle reconciles every address and lease until nothing changes.
func (w *world) settle() {
	w.t.Helper()
	ctx := context.Background()
	for range 5 {
		var vms v1alpha2.VirtualMachineList
		var vmips v1alpha2.VirtualMachineIPAddressList
		var leases v1alpha2.VirtualMachineIPAddressLeaseList
		for _, l := range []client.ObjectList{&vms, &vmips, &leases} {
			if err := w.c.List(ctx, l); err != nil {
				w.t.Fatal(err)
			}
		}
		for _, vm := range vms.Items {
			w.must(w.vms.Reconcile(ctx, req(vm.Namespace, vm.Name)))
		}
		for _, v := range vmips.Items {
			w.must(w.addrs.Reconcile(ctx, req(v.Namespace, v.Name)))
		}
		for _, l := range leases.Items {
			w.must(w.leases.Reconcile(ctx, req("", l.Name)))
		}
	}
}

func (w *world) must(_ reconcile.Result, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func (w *world) vmip(name string) *v1alpha2.VirtualMachineIPAddress {
	w.t.Helper()
	v := &v1alpha2.VirtualMachineIPAddress{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, v); err != nil {
		w.t.Fatal(err)
	}
	return v
}

func (w *world) lease(name string) (*v1alpha2.VirtualMachineIPAddressLease, bool) {
	l := &v1alpha2.VirtualMachineIPAddressLease{}
	err := w.c.Get(context.Background(), types.NamespacedName{Name: name}, l)
	return l, err == nil
}

func TestAutoAddressesAreDistinctAndSurvive(t *testing.T) {
	w := newWorld(t, "10.66.10.0/29")
	for _, n := range []string{"a", "b", "c"} {
		w.create(address(n, v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	}
	w.settle()
	seen := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		v := w.vmip(n)
		if v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseBound || v.Status.Address == "" {
			t.Fatalf("%s: %+v", n, v.Status)
		}
		if other, dup := seen[v.Status.Address]; dup {
			t.Fatalf("%s and %s both have %s", n, other, v.Status.Address)
		}
		seen[v.Status.Address] = n
		l, ok := w.lease(ipam.LeaseName(netipMust(v.Status.Address)))
		if !ok || !HeldBy(l, v) || l.Status.Phase != v1alpha2.VirtualMachineIPAddressLeasePhaseBound {
			t.Fatalf("lease of %s: %+v", n, l)
		}
	}
	// A restart of the controller (a new reconciler on the same objects) changes nothing.
	before := w.vmip("b").Status.Address
	w.addrs = NewAddressReconciler(w.c, w.c, w.addrs.rng, w.clock, w.recorder)
	w.settle()
	if got := w.vmip("b").Status.Address; got != before {
		t.Fatalf("address of b moved from %s to %s", before, got)
	}
}

func TestExhaustedRange(t *testing.T) {
	w := newWorld(t, "10.66.10.0/30") // two addresses
	for _, n := range []string{"a", "b", "c"} {
		w.create(address(n, v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	}
	w.settle()
	if v := w.vmip("c"); v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhasePending {
		t.Fatalf("c: %+v", v.Status)
	}
}

// TestNoRange: with virtualMachineCIDRs empty (the chart's default) an Auto address stays Pending
// with a message that names the value, and a Warning event.
func TestNoRange(t *testing.T) {
	w := newWorld(t)
	w.create(address("a", v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	w.settle()
	v := w.vmip("a")
	c := meta.FindStatusCondition(v.Status.Conditions, string(vmipcondition.BoundType))
	if v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhasePending || c == nil || c.Message != NoRangeMessage {
		t.Fatalf("a: %+v", v.Status)
	}
	if e := <-w.recorder.Events; !strings.Contains(e, "NoVirtualMachineCIDRs") || !strings.Contains(e, "virtualMachineCIDRs") {
		t.Errorf("event %q", e)
	}
}

func TestStaticConflictAndRelease(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	w.create(address("first", v1alpha2.VirtualMachineIPAddressTypeStatic, "10.66.10.9", ""))
	w.settle()
	w.create(address("second", v1alpha2.VirtualMachineIPAddressTypeStatic, "10.66.10.9", ""))
	w.settle()
	if v := w.vmip("second"); v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhasePending {
		t.Fatalf("second: %+v", v.Status)
	}
	// The first goes: its lease is released, and the second takes it within the retention.
	if err := w.c.Delete(context.Background(), w.vmip("first")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w.must(w.leases.Reconcile(ctx, req("", "ip-10-66-10-9")))
	l, _ := w.lease("ip-10-66-10-9")
	if l.Spec.VirtualMachineIPAddressRef != nil || l.Status.Phase != v1alpha2.VirtualMachineIPAddressLeasePhaseReleased {
		t.Fatalf("lease after its holder went: %+v", l)
	}
	w.settle()
	if v := w.vmip("second"); v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseBound || v.Status.Address != "10.66.10.9" {
		t.Fatalf("second after first went: %+v", v.Status)
	}
}

func TestReleasedLeaseIsDeletedAfterRetention(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	w.create(address("a", v1alpha2.VirtualMachineIPAddressTypeAuto, "", ""))
	w.settle()
	name := ipam.LeaseName(netipMust(w.vmip("a").Status.Address))
	if err := w.c.Delete(context.Background(), w.vmip("a")); err != nil {
		t.Fatal(err)
	}
	w.settle()
	if l, ok := w.lease(name); !ok || l.Status.Phase != v1alpha2.VirtualMachineIPAddressLeasePhaseReleased {
		t.Fatalf("lease right after release: %+v, %v", l, ok)
	}
	w.clock.Step(10 * time.Minute)
	w.settle()
	if _, ok := w.lease(name); ok {
		t.Fatal("released lease kept past its retention period")
	}
}

func TestMachineGetsItsAddress(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	w.create(&v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm1")})
	w.create(&v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm2"), Spec: v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: "mine"}})
	w.create(address("mine", v1alpha2.VirtualMachineIPAddressTypeStatic, "10.66.10.100", ""))
	w.settle()
	v := w.vmip("vm1")
	if v.Labels[LabelVirtualMachineName] != "vm1" || len(v.OwnerReferences) != 1 || v.OwnerReferences[0].Name != "vm1" {
		t.Fatalf("implicit address: %+v", v.ObjectMeta)
	}
	if v.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseAttached || v.Status.VirtualMachineName != "vm1" {
		t.Fatalf("implicit address status: %+v", v.Status)
	}
	if m := w.vmip("mine"); m.Status.Phase != v1alpha2.VirtualMachineIPAddressPhaseAttached || m.Status.VirtualMachineName != "vm2" || m.Status.Address != "10.66.10.100" {
		t.Fatalf("named address: %+v", m.Status)
	}
	var list v1alpha2.VirtualMachineIPAddressList
	if err := w.c.List(context.Background(), &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("addresses: %d, %v (vm2 names its own, so none is created for it)", len(list.Items), err)
	}
}

// A machine's address is created once, however often the machine changes (its status changes
// bring the machine reconciler back each time): no create is sent for an address that exists.
func TestMachineAddressCreatedOnce(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	w.create(&v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm1")})
	creates := 0
	counted := interceptor.NewClient(w.c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			return c.Create(ctx, obj, opts...)
		},
	})
	r := NewMachineReconciler(counted)
	for range 5 {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if creates != 1 {
		t.Errorf("%d creates for five reconciles, want 1", creates)
	}
	if v := w.vmip("vm1"); v.Name != "vm1" {
		t.Errorf("address %+v", v.ObjectMeta)
	}
}

func metavOf(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestMachineAddresses(t *testing.T) {
	w := newWorld(t, "10.66.10.0/24")
	vm := &v1alpha2.VirtualMachine{ObjectMeta: metavOf("vm1"), Spec: v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: "new"}}
	old := address("old", v1alpha2.VirtualMachineIPAddressTypeAuto, "", "10.66.10.5")
	old.Status.VirtualMachineName = "vm1"
	w.create(old)
	got := w.addrs.machineAddresses(context.Background(), vm)
	if len(got) != 2 || got[0].Name != "new" || got[1].Name != "old" {
		t.Fatalf("requests %v, want the new address and the one that still names the machine", got)
	}
}
