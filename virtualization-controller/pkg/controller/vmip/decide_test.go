package vmip

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

var t0 = metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

func address(name string, typ v1alpha2.VirtualMachineIPAddressType, static, statusAddr string) *v1alpha2.VirtualMachineIPAddress {
	v := &v1alpha2.VirtualMachineIPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Generation: 1},
		Spec:       v1alpha2.VirtualMachineIPAddressSpec{Type: typ, StaticIP: static},
	}
	if statusAddr != "" {
		v.Status = BoundStatus(v, netip.MustParseAddr(statusAddr), "", t0)
	}
	return v
}

func lease(addr, holderNS, holder string) *v1alpha2.VirtualMachineIPAddressLease {
	l := &v1alpha2.VirtualMachineIPAddressLease{ObjectMeta: metav1.ObjectMeta{Name: ipam.LeaseName(netip.MustParseAddr(addr)), CreationTimestamp: t0}}
	if holder != "" {
		l.Spec.VirtualMachineIPAddressRef = &v1alpha2.VirtualMachineIPAddressLeaseIPAddressRef{Namespace: holderNS, Name: holder}
	}
	return l
}

func TestDecide(t *testing.T) {
	rng, err := ipam.ParseRange([]string{"10.66.10.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	auto, static := v1alpha2.VirtualMachineIPAddressTypeAuto, v1alpha2.VirtualMachineIPAddressTypeStatic
	for _, tc := range []struct {
		name       string
		vmip       *v1alpha2.VirtualMachineIPAddress
		held       *v1alpha2.VirtualMachineIPAddressLease
		wanted     *v1alpha2.VirtualMachineIPAddressLease
		vm         string
		step       Step
		addr       string
		phase      v1alpha2.VirtualMachineIPAddressPhase
		reason     string
		wantStatus bool
	}{
		{name: "auto, new", vmip: address("a", auto, "", ""), step: StepAllocate},
		{name: "auto, its lease", vmip: address("a", auto, "", ""), held: lease("10.66.10.5", "ns", "a"), step: StepStatus, addr: "10.66.10.5", phase: v1alpha2.VirtualMachineIPAddressPhaseBound, reason: "Bound"},
		{name: "auto, used by a machine", vmip: address("a", auto, "", ""), held: lease("10.66.10.5", "ns", "a"), vm: "vm1", step: StepStatus, addr: "10.66.10.5", phase: v1alpha2.VirtualMachineIPAddressPhaseAttached, reason: "Bound"},
		{name: "auto, its lease gone: made again", vmip: address("a", auto, "", "10.66.10.5"), step: StepCreateLease, addr: "10.66.10.5"},
		{name: "auto, its lease released: taken back", vmip: address("a", auto, "", "10.66.10.5"), wanted: lease("10.66.10.5", "", ""), step: StepTakeLease, addr: "10.66.10.5"},
		{name: "auto, its lease lost to another", vmip: address("a", auto, "", "10.66.10.5"), wanted: lease("10.66.10.5", "ns", "b"), step: StepAllocate},
		{name: "auto, an address the range no longer has", vmip: address("a", auto, "", "10.66.99.5"), step: StepAllocate},
		{name: "static, free", vmip: address("s", static, "10.66.10.9", ""), step: StepCreateLease, addr: "10.66.10.9"},
		{name: "static, held", vmip: address("s", static, "10.66.10.9", ""), held: lease("10.66.10.9", "ns", "s"), wanted: lease("10.66.10.9", "ns", "s"), step: StepStatus, addr: "10.66.10.9", phase: v1alpha2.VirtualMachineIPAddressPhaseBound, reason: "Bound"},
		{name: "static, released", vmip: address("s", static, "10.66.10.9", ""), wanted: lease("10.66.10.9", "", ""), step: StepTakeLease, addr: "10.66.10.9"},
		{name: "static, another's", vmip: address("s", static, "10.66.10.9", ""), wanted: lease("10.66.10.9", "other", "s"), step: StepStatus, phase: v1alpha2.VirtualMachineIPAddressPhasePending, reason: string(vmipcondition.VirtualMachineIPAddressLeaseAlreadyExists)},
		{name: "static, out of range", vmip: address("s", static, "10.66.11.9", ""), step: StepStatus, phase: v1alpha2.VirtualMachineIPAddressPhasePending, reason: string(vmipcondition.VirtualMachineIPAddressIsOutOfTheValidRange)},
		{name: "static, the broadcast address", vmip: address("s", static, "10.66.10.255", ""), step: StepStatus, phase: v1alpha2.VirtualMachineIPAddressPhasePending, reason: string(vmipcondition.VirtualMachineIPAddressIsOutOfTheValidRange)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(Facts{VMIP: tc.vmip, Held: tc.held, Wanted: tc.wanted, VirtualMachine: tc.vm, Range: rng, Now: t0})
			if p.Step != tc.step {
				t.Fatalf("step %s, want %s", p.Step, tc.step)
			}
			if tc.addr != "" && p.Addr.String() != tc.addr {
				t.Fatalf("address %s, want %s", p.Addr, tc.addr)
			}
			if tc.step != StepStatus {
				return
			}
			if p.Status.Phase != tc.phase || p.Status.Address != tc.addr || p.Status.VirtualMachineName != tc.vm {
				t.Fatalf("status %+v, want phase %s, address %q, machine %q", p.Status, tc.phase, tc.addr, tc.vm)
			}
			if c := meta.FindStatusCondition(p.Status.Conditions, string(vmipcondition.BoundType)); c == nil || c.Reason != tc.reason {
				t.Fatalf("Bound condition %+v, want reason %s", c, tc.reason)
			}
		})
	}
}

func TestPendingMessages(t *testing.T) {
	rng, _ := ipam.ParseRange([]string{"10.66.10.0/24"})
	p := Decide(Facts{VMIP: address("s", v1alpha2.VirtualMachineIPAddressTypeStatic, "10.66.11.9", ""), Range: rng, Now: t0})
	if c := meta.FindStatusCondition(p.Status.Conditions, "Bound"); c.Message != "The requested address 10.66.11.9 is out of the valid range" {
		t.Fatalf("message %q", c.Message)
	}
	p = Decide(Facts{VMIP: address("s", v1alpha2.VirtualMachineIPAddressTypeStatic, "10.66.10.9", ""), Wanted: lease("10.66.10.9", "x", "y"), Range: rng, Now: t0})
	if c := meta.FindStatusCondition(p.Status.Conditions, "Bound"); c.Message != "the specified IP address 10.66.10.9 has already been allocated and has not been released" {
		t.Fatalf("message %q", c.Message)
	}
}

func TestUsedBy(t *testing.T) {
	vm := func(name, vmipName string, created int) v1alpha2.VirtualMachine {
		return v1alpha2.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second))},
			Spec:       v1alpha2.VirtualMachineSpec{VirtualMachineIPAddressName: vmipName},
		}
	}
	vmip := address("ip", v1alpha2.VirtualMachineIPAddressTypeAuto, "", "")
	for _, tc := range []struct {
		name string
		vms  []v1alpha2.VirtualMachine
		want string
	}{
		{name: "none", vms: []v1alpha2.VirtualMachine{vm("a", "", 0), vm("b", "other", 0)}},
		{name: "named", vms: []v1alpha2.VirtualMachine{vm("a", "ip", 0)}, want: "a"},
		{name: "its own", vms: []v1alpha2.VirtualMachine{vm("ip", "", 0)}, want: "ip"},
		{name: "the oldest of two", vms: []v1alpha2.VirtualMachine{vm("late", "ip", 5), vm("early", "ip", 1)}, want: "early"},
		{name: "the first name of two as old", vms: []v1alpha2.VirtualMachine{vm("b", "ip", 1), vm("a", "ip", 1)}, want: "a"},
	} {
		if got := UsedBy(vmip, tc.vms); got != tc.want {
			t.Errorf("%s: UsedBy = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDecideLease(t *testing.T) {
	const retention = 10 * time.Minute
	released := lease("10.66.10.5", "", "")
	released.Status = LeaseStatus(released, t0)
	bound := address("a", v1alpha2.VirtualMachineIPAddressTypeAuto, "", "10.66.10.5")
	elsewhere := address("a", v1alpha2.VirtualMachineIPAddressTypeAuto, "", "10.66.10.6")
	allocating := address("a", v1alpha2.VirtualMachineIPAddressTypeAuto, "", "")
	otherStatic := address("a", v1alpha2.VirtualMachineIPAddressTypeStatic, "10.66.10.7", "")
	for _, tc := range []struct {
		name   string
		lease  *v1alpha2.VirtualMachineIPAddressLease
		holder *v1alpha2.VirtualMachineIPAddress
		now    time.Time
		want   LeaseDecision
		after  time.Duration
	}{
		{name: "held", lease: lease("10.66.10.5", "ns", "a"), holder: bound, now: t0.Time, want: LeaseKeep},
		{name: "held while its address is written", lease: lease("10.66.10.5", "ns", "a"), holder: allocating, now: t0.Time, want: LeaseKeep},
		{name: "holder gone", lease: lease("10.66.10.5", "ns", "a"), now: t0.Time, want: LeaseRelease},
		{name: "holder bound elsewhere", lease: lease("10.66.10.5", "ns", "a"), holder: elsewhere, now: t0.Time, want: LeaseRelease},
		{name: "holder asks for another static address", lease: lease("10.66.10.5", "ns", "a"), holder: otherStatic, now: t0.Time, want: LeaseRelease},
		{name: "released, kept", lease: released, now: t0.Add(time.Minute), want: LeaseKeep, after: 9 * time.Minute},
		{name: "released, retention over", lease: released, now: t0.Add(retention), want: LeaseDelete},
	} {
		got, after := DecideLease(tc.lease, tc.holder, retention, tc.now)
		if got != tc.want || after != tc.after {
			t.Errorf("%s: DecideLease = %d, %s; want %d, %s", tc.name, got, after, tc.want, tc.after)
		}
	}
}

func TestPhaseValues(t *testing.T) {
	m := phasegauge.Values(AddressPhases, "Attached")
	if len(m) != 3 || m["Attached"] != 1 || m["Bound"] != 0 || m["Pending"] != 0 {
		t.Fatalf("%v", m)
	}
	if p := AddressPhase(&v1alpha2.VirtualMachineIPAddress{}); p != v1alpha2.VirtualMachineIPAddressPhasePending {
		t.Fatalf("phase of a new address: %s", p)
	}
	if p := LeasePhase(lease("10.66.10.5", "ns", "a")); p != v1alpha2.VirtualMachineIPAddressLeasePhaseBound {
		t.Fatalf("phase of a new lease: %s", p)
	}
}
