package vmip

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
)

// FinalizerProtection keeps an address while a machine uses it, as the reference module's
// vmip-protection does: deleting it waits until no machine uses it.
const FinalizerProtection = "virtualization.deckhouse.io/vmip-protection"

// Protection is what the protection of an address does.
type Protection int

// The protection steps.
const (
	// ProtectionKeep changes no finalizer.
	ProtectionKeep Protection = iota
	// ProtectionAdd adds FinalizerProtection: a machine uses the address.
	ProtectionAdd
	// ProtectionRemove removes FinalizerProtection: no machine uses the address (any more).
	ProtectionRemove
)

func (p Protection) String() string {
	return [...]string{"Keep", "Add", "Remove"}[p]
}

// DecideProtection is the protection step of vmip, used by the machine usedBy ("" for none; a
// machine being deleted does not count, see UsedBy, so an address owned by its machine is never
// waited for by the machine's foreground deletion). A finalizer cannot be added to an object
// being deleted.
func DecideProtection(vmip *v1alpha2.VirtualMachineIPAddress, usedBy string) Protection {
	has := controllerutil.ContainsFinalizer(vmip, FinalizerProtection)
	switch {
	case usedBy != "" && !has && vmip.DeletionTimestamp == nil:
		return ProtectionAdd
	case usedBy == "" && has:
		return ProtectionRemove
	}
	return ProtectionKeep
}

// DeletionWaitsStatus is the status of an address deleted while the machine vm uses it: as it
// was, its Attached condition saying that the deletion waits for the machine.
func DeletionWaitsStatus(vmip *v1alpha2.VirtualMachineIPAddress, vm string, now metav1.Time) v1alpha2.VirtualMachineIPAddressStatus {
	s := base(vmip)
	set(&s.Conditions, string(vmipcondition.AttachedType), metav1.ConditionTrue, string(vmipcondition.Attached),
		fmt.Sprintf("The virtual machine %s uses the address: its deletion waits until no virtual machine uses it", vm), vmip.Generation, now)
	return s
}
