package vmip

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	"github.com/d8virt/api/core/v1alpha2/vmiplcondition"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

// Step is what a reconcile of an address does.
type Step int

// The steps of an address.
const (
	// StepStatus only writes the status the plan carries.
	StepStatus Step = iota
	// StepCreateLease creates the lease of Plan.Addr: its creation is the lock.
	StepCreateLease
	// StepTakeLease takes over the released lease of Plan.Addr (an update with its
	// resourceVersion: of two takers one wins).
	StepTakeLease
	// StepAllocate picks a free address of the range and creates its lease.
	StepAllocate
)

func (s Step) String() string {
	return [...]string{"Status", "CreateLease", "TakeLease", "Allocate"}[s]
}

// Facts are what a reconcile of an address reads.
type Facts struct {
	VMIP *v1alpha2.VirtualMachineIPAddress
	// Held is a lease that names VMIP as its holder, nil when there is none.
	Held *v1alpha2.VirtualMachineIPAddressLease
	// Wanted is the lease of the address VMIP asks for (spec.staticIP) or had (status.address),
	// nil when it does not exist or there is no such address.
	Wanted *v1alpha2.VirtualMachineIPAddressLease
	// VirtualMachine is the machine that uses the address, "" for none.
	VirtualMachine string
	Range          ipam.Range
	Now            metav1.Time
}

// Plan is the step and, for StepStatus, the status to write.
type Plan struct {
	Step   Step
	Addr   netip.Addr
	Status v1alpha2.VirtualMachineIPAddressStatus
}

// WantedAddress is the address a VMIP asks for (Static) or had (Auto), invalid when none.
func WantedAddress(vmip *v1alpha2.VirtualMachineIPAddress) netip.Addr {
	s := vmip.Status.Address
	if vmip.Spec.Type == v1alpha2.VirtualMachineIPAddressTypeStatic {
		s = vmip.Spec.StaticIP
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}
	}
	return a
}

// Decide is the next step for an address.
func Decide(f Facts) Plan {
	vmip := f.VMIP
	if vmip.Spec.Type == v1alpha2.VirtualMachineIPAddressTypeStatic {
		addr, err := f.Range.Check(vmip.Spec.StaticIP)
		switch {
		case errors.Is(err, ipam.ErrOutOfRange):
			return Plan{Status: PendingStatus(vmip, vmipcondition.VirtualMachineIPAddressIsOutOfTheValidRange,
				OutOfRangeMessage(vmip.Spec.StaticIP), f.Now)}
		case err != nil:
			return Plan{Status: PendingStatus(vmip, vmipcondition.VirtualMachineIPAddressIsOutOfTheValidRange, err.Error(), f.Now)}
		}
		return claim(f, addr, false)
	}
	if f.Held != nil {
		addr, err := ipam.ParseLeaseName(f.Held.Name)
		if err == nil {
			return Plan{Addr: addr, Status: BoundStatus(vmip, addr, f.VirtualMachine, f.Now)}
		}
	}
	if addr := WantedAddress(vmip); addr.IsValid() && f.Range.Contains(addr) {
		return claim(f, addr, true)
	}
	return Plan{Step: StepAllocate}
}

// claim gets the lease of addr: creates it, takes it over when released, or, when another
// address holds it, waits (Static) or allocates another address (Auto, whose address was lost).
func claim(f Facts, addr netip.Addr, auto bool) Plan {
	switch {
	case f.Wanted == nil:
		return Plan{Step: StepCreateLease, Addr: addr}
	case HeldBy(f.Wanted, f.VMIP):
		return Plan{Addr: addr, Status: BoundStatus(f.VMIP, addr, f.VirtualMachine, f.Now)}
	case f.Wanted.Spec.VirtualMachineIPAddressRef == nil:
		return Plan{Step: StepTakeLease, Addr: addr}
	case auto:
		return Plan{Step: StepAllocate}
	}
	return Plan{Addr: addr, Status: PendingStatus(f.VMIP, vmipcondition.VirtualMachineIPAddressLeaseAlreadyExists,
		AllocatedMessage(addr.String()), f.Now)}
}

// OutOfRangeMessage is the reference module's words for a static address outside the range.
func OutOfRangeMessage(addr string) string {
	return fmt.Sprintf("The requested address %s is out of the valid range", addr)
}

// AllocatedMessage is the reference module's words for a static address another holds.
func AllocatedMessage(addr string) string {
	return fmt.Sprintf("the specified IP address %s has already been allocated and has not been released", addr)
}

// PendingStatus is the status of an address no lease holds: Bound False with reason.
func PendingStatus(vmip *v1alpha2.VirtualMachineIPAddress, reason vmipcondition.BoundReason, message string, now metav1.Time) v1alpha2.VirtualMachineIPAddressStatus {
	s := base(vmip)
	s.Address = ""
	s.VirtualMachineName = ""
	s.Phase = v1alpha2.VirtualMachineIPAddressPhasePending
	set(&s.Conditions, string(vmipcondition.BoundType), metav1.ConditionFalse, string(reason), message, vmip.Generation, now)
	meta.RemoveStatusCondition(&s.Conditions, string(vmipcondition.AttachedType))
	return s
}

// BoundStatus is the status of an address its lease holds: Bound, or Attached when vm uses it.
func BoundStatus(vmip *v1alpha2.VirtualMachineIPAddress, addr netip.Addr, vm string, now metav1.Time) v1alpha2.VirtualMachineIPAddressStatus {
	s := base(vmip)
	s.Address = addr.String()
	s.VirtualMachineName = vm
	set(&s.Conditions, string(vmipcondition.BoundType), metav1.ConditionTrue, string(vmipcondition.Bound),
		fmt.Sprintf("The lease %s holds the address", ipam.LeaseName(addr)), vmip.Generation, now)
	if vm == "" {
		s.Phase = v1alpha2.VirtualMachineIPAddressPhaseBound
		set(&s.Conditions, string(vmipcondition.AttachedType), metav1.ConditionFalse, string(vmipcondition.VirtualMachineNotFound),
			"No virtual machine uses the address", vmip.Generation, now)
		return s
	}
	s.Phase = v1alpha2.VirtualMachineIPAddressPhaseAttached
	set(&s.Conditions, string(vmipcondition.AttachedType), metav1.ConditionTrue, string(vmipcondition.Attached),
		fmt.Sprintf("The virtual machine %s uses the address", vm), vmip.Generation, now)
	return s
}

func base(vmip *v1alpha2.VirtualMachineIPAddress) v1alpha2.VirtualMachineIPAddressStatus {
	s := *vmip.Status.DeepCopy()
	s.ObservedGeneration = vmip.Generation
	return s
}

func set(conds *[]metav1.Condition, typ string, status metav1.ConditionStatus, reason, message string, gen int64, now metav1.Time) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: gen, LastTransitionTime: now})
}

// UsedBy is the machine that uses vmip among vms (the namespace's machines): the oldest that
// names it or, for an address created for a machine, that machine.
func UsedBy(vmip *v1alpha2.VirtualMachineIPAddress, vms []v1alpha2.VirtualMachine) string {
	var user *v1alpha2.VirtualMachine
	for i := range vms {
		vm := &vms[i]
		if vm.DeletionTimestamp != nil || vm.Namespace != vmip.Namespace || AddressName(vm) != vmip.Name {
			continue
		}
		if user == nil || vm.CreationTimestamp.Before(&user.CreationTimestamp) ||
			(vm.CreationTimestamp.Equal(&user.CreationTimestamp) && vm.Name < user.Name) {
			user = vm
		}
	}
	if user == nil {
		return ""
	}
	return user.Name
}

// LeaseDecision is what the lease reconciler does with a lease.
type LeaseDecision int

// The lease decisions.
const (
	// LeaseKeep writes the lease's status (Bound or Released) and waits.
	LeaseKeep LeaseDecision = iota
	// LeaseRelease clears the holder: its address is gone or holds another lease.
	LeaseRelease
	// LeaseDelete deletes a lease released longer ago than the retention period.
	LeaseDelete
)

// DecideLease is what happens to lease, given its holder (nil when it does not exist) and the
// retention period of released leases; for a released lease it keeps, also how long until it is
// deleted.
func DecideLease(lease *v1alpha2.VirtualMachineIPAddressLease, holder *v1alpha2.VirtualMachineIPAddress, retention time.Duration, now time.Time) (LeaseDecision, time.Duration) {
	if lease.Spec.VirtualMachineIPAddressRef != nil {
		if holder == nil || holdsAnother(holder, lease.Name) {
			return LeaseRelease, 0
		}
		return LeaseKeep, 0
	}
	left := ReleasedAt(lease).Add(retention).Sub(now)
	if left <= 0 {
		return LeaseDelete, 0
	}
	return LeaseKeep, left
}

// holdsAnother says whether holder asks for (Static) or is bound to (Auto) an address other than
// the lease's: a lease left over from an allocation the cache did not show in time, or from an
// address of that name that was deleted and made anew.
func holdsAnother(holder *v1alpha2.VirtualMachineIPAddress, leaseName string) bool {
	if holder.Spec.Type == v1alpha2.VirtualMachineIPAddressTypeStatic {
		return ipam.LeaseName(WantedAddress(holder)) != leaseName
	}
	bound := meta.IsStatusConditionTrue(holder.Status.Conditions, string(vmipcondition.BoundType))
	addr := WantedAddress(holder)
	return bound && addr.IsValid() && ipam.LeaseName(addr) != leaseName
}

// ReleasedAt is when lease was released: the transition of its Bound condition to Released, or
// its creation when it has none.
func ReleasedAt(lease *v1alpha2.VirtualMachineIPAddressLease) time.Time {
	c := meta.FindStatusCondition(lease.Status.Conditions, string(vmiplcondition.BoundType))
	if c != nil && c.Status == metav1.ConditionFalse && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	return lease.CreationTimestamp.Time
}

// LeaseStatus is the status of lease: Bound while an address holds it, Released after.
func LeaseStatus(lease *v1alpha2.VirtualMachineIPAddressLease, now metav1.Time) v1alpha2.VirtualMachineIPAddressLeaseStatus {
	s := *lease.Status.DeepCopy()
	s.ObservedGeneration = lease.Generation
	if ref := lease.Spec.VirtualMachineIPAddressRef; ref != nil {
		s.Phase = v1alpha2.VirtualMachineIPAddressLeasePhaseBound
		set(&s.Conditions, string(vmiplcondition.BoundType), metav1.ConditionTrue, string(vmiplcondition.Bound),
			fmt.Sprintf("The VirtualMachineIPAddress %s/%s holds the lease", ref.Namespace, ref.Name), lease.Generation, now)
		return s
	}
	s.Phase = v1alpha2.VirtualMachineIPAddressLeasePhaseReleased
	set(&s.Conditions, string(vmiplcondition.BoundType), metav1.ConditionFalse, string(vmiplcondition.Released),
		"No VirtualMachineIPAddress holds the lease; it is deleted after the retention period", lease.Generation, now)
	return s
}
