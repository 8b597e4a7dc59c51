package vmip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

// allocateAttempts bounds the leases one reconcile tries to create before it waits for the cache
// to show the addresses others took meanwhile.
const allocateAttempts = 32

// AddressReconciler gives each VirtualMachineIPAddress its lease and status.
type AddressReconciler struct {
	client client.Client
	// apiReader reads a lease past the cache before the reconciler decides it does not exist or
	// that another holds it.
	apiReader client.Reader
	rng       ipam.Range
	clock     clock.PassiveClock
	recorder  events.EventRecorder
}

// NewAddressReconciler wires an AddressReconciler for the addresses of rng.
func NewAddressReconciler(c client.Client, apiReader client.Reader, rng ipam.Range, clk clock.PassiveClock, recorder events.EventRecorder) *AddressReconciler {
	return &AddressReconciler{client: c, apiReader: apiReader, rng: rng, clock: clk, recorder: recorder}
}

// SetupWithManager watches addresses, the leases that name them and the machines that use them.
func (r *AddressReconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).
		For(&v1alpha2.VirtualMachineIPAddress{}).
		Watches(&v1alpha2.VirtualMachineIPAddressLease{}, handler.EnqueueRequestsFromMapFunc(leaseHolder)).
		Watches(&v1alpha2.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.machineAddresses)).
		Named("virtualmachineipaddress").
		Complete(r)
}

func leaseHolder(_ context.Context, o client.Object) []reconcile.Request {
	ref := o.(*v1alpha2.VirtualMachineIPAddressLease).Spec.VirtualMachineIPAddressRef
	if ref == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
}

// machineAddresses are the address a machine uses and the ones whose status still names it (it
// named another since, or is gone).
func (r *AddressReconciler) machineAddresses(ctx context.Context, o client.Object) []reconcile.Request {
	vm := o.(*v1alpha2.VirtualMachine)
	reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: vm.Namespace, Name: AddressName(vm)}}}
	var list v1alpha2.VirtualMachineIPAddressList
	if err := r.client.List(ctx, &list, client.InNamespace(vm.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "list the addresses of a machine", "virtualMachine", vm.Name)
		return reqs
	}
	for _, v := range list.Items {
		if v.Status.VirtualMachineName == vm.Name && v.Name != AddressName(vm) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: v.Namespace, Name: v.Name}})
		}
	}
	return reqs
}

// Reconcile does the next step for one address.
func (r *AddressReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vmip := &v1alpha2.VirtualMachineIPAddress{}
	if err := r.client.Get(ctx, req.NamespacedName, vmip); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if vmip.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(vmip, FinalizerProtection) {
		// The lease reconciler releases its lease once it is gone.
		return reconcile.Result{}, nil
	}
	f, err := r.facts(ctx, vmip)
	if err != nil {
		return reconcile.Result{}, err
	}
	if p := DecideProtection(vmip, f.VirtualMachine); p != ProtectionKeep {
		return reconcile.Result{}, r.protect(ctx, vmip, p, f.VirtualMachine)
	}
	if vmip.DeletionTimestamp != nil {
		// A machine uses the address: its deletion waits.
		return reconcile.Result{}, r.setStatus(ctx, vmip, DeletionWaitsStatus(vmip, f.VirtualMachine, f.Now))
	}
	plan := Decide(f)
	log.FromContext(ctx).V(1).Info("reconcile", "step", plan.Step.String(), "address", plan.Addr, "phase", vmip.Status.Phase)
	switch plan.Step {
	case StepCreateLease:
		err := r.createLease(ctx, vmip, plan.Addr)
		if apierrors.IsAlreadyExists(err) {
			// Someone was faster: the next reconcile sees whose it is.
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.setStatus(ctx, vmip, BoundStatus(vmip, plan.Addr, f.VirtualMachine, f.Now))
	case StepTakeLease:
		lease := f.Wanted.DeepCopy()
		lease.Spec.VirtualMachineIPAddressRef = &v1alpha2.VirtualMachineIPAddressLeaseIPAddressRef{Name: vmip.Name, Namespace: vmip.Namespace}
		if err := r.client.Update(ctx, lease); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, fmt.Errorf("take lease %s: %w", lease.Name, err)
		}
		log.FromContext(ctx).Info("released lease taken", "lease", lease.Name)
		return reconcile.Result{}, r.setStatus(ctx, vmip, BoundStatus(vmip, plan.Addr, f.VirtualMachine, f.Now))
	case StepAllocate:
		return r.allocate(ctx, vmip, f)
	}
	return reconcile.Result{}, r.setStatus(ctx, vmip, plan.Status)
}

// protect adds or removes the protection finalizer; the change brings the address back.
func (r *AddressReconciler) protect(ctx context.Context, vmip *v1alpha2.VirtualMachineIPAddress, p Protection, vm string) error {
	patch := client.MergeFromWithOptions(vmip.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if p == ProtectionAdd {
		controllerutil.AddFinalizer(vmip, FinalizerProtection)
	} else {
		controllerutil.RemoveFinalizer(vmip, FinalizerProtection)
	}
	if err := r.client.Patch(ctx, vmip, patch); err != nil {
		if apierrors.IsConflict(err) {
			// Decided on a cache that lags behind the address: the watch brings the newer one,
			// which is decided again (an error would retry at once, conflicting again).
			log.FromContext(ctx).V(1).Info("protection decided on a stale address", "step", p.String())
			return nil
		}
		return client.IgnoreNotFound(fmt.Errorf("%s protection finalizer: %w", p, err))
	}
	log.FromContext(ctx).Info("protection", "step", p.String(), "virtualMachine", vm)
	return nil
}

func (r *AddressReconciler) facts(ctx context.Context, vmip *v1alpha2.VirtualMachineIPAddress) (Facts, error) {
	f := Facts{VMIP: vmip, Range: r.rng, Now: r.now()}
	var leases v1alpha2.VirtualMachineIPAddressLeaseList
	if err := r.client.List(ctx, &leases, client.MatchingFields{IndexLeaseByRef: AddressKey(vmip)}); err != nil {
		return Facts{}, fmt.Errorf("list leases of %s: %w", AddressKey(vmip), err)
	}
	f.Held = pickHeld(leases.Items, WantedAddress(vmip))
	if addr := WantedAddress(vmip); addr.IsValid() {
		lease, err := r.lease(ctx, ipam.LeaseName(addr))
		if err != nil {
			return Facts{}, err
		}
		f.Wanted = lease
	}
	var vms v1alpha2.VirtualMachineList
	if err := r.client.List(ctx, &vms, client.InNamespace(vmip.Namespace)); err != nil {
		return Facts{}, fmt.Errorf("list virtual machines: %w", err)
	}
	f.VirtualMachine = UsedBy(vmip, vms.Items)
	return f, nil
}

// pickHeld is the lease of want among the leases an address holds, else the first by name.
func pickHeld(leases []v1alpha2.VirtualMachineIPAddressLease, want netip.Addr) *v1alpha2.VirtualMachineIPAddressLease {
	if len(leases) == 0 {
		return nil
	}
	sort.Slice(leases, func(i, j int) bool { return leases[i].Name < leases[j].Name })
	for i := range leases {
		if want.IsValid() && leases[i].Name == ipam.LeaseName(want) {
			return &leases[i]
		}
	}
	return &leases[0]
}

// lease reads a lease from the cache, and from the apiserver when the cache has none.
func (r *AddressReconciler) lease(ctx context.Context, name string) (*v1alpha2.VirtualMachineIPAddressLease, error) {
	lease := &v1alpha2.VirtualMachineIPAddressLease{}
	err := r.client.Get(ctx, types.NamespacedName{Name: name}, lease)
	if apierrors.IsNotFound(err) {
		err = r.apiReader.Get(ctx, types.NamespacedName{Name: name}, lease)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s: %w", name, err)
	}
	return lease, nil
}

func (r *AddressReconciler) createLease(ctx context.Context, vmip *v1alpha2.VirtualMachineIPAddress, addr netip.Addr) error {
	lease := &v1alpha2.VirtualMachineIPAddressLease{
		ObjectMeta: metav1.ObjectMeta{Name: ipam.LeaseName(addr)},
		Spec: v1alpha2.VirtualMachineIPAddressLeaseSpec{
			VirtualMachineIPAddressRef: &v1alpha2.VirtualMachineIPAddressLeaseIPAddressRef{Name: vmip.Name, Namespace: vmip.Namespace},
		},
	}
	if err := r.client.Create(ctx, lease); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return err
		}
		return fmt.Errorf("create lease %s: %w", lease.Name, err)
	}
	log.FromContext(ctx).Info("lease created", "lease", lease.Name, "address", addr.String())
	return nil
}

// allocate creates the lease of the first free address, skipping the ones whose lease turns out
// to exist (the cache lags behind other allocations).
// NoRangeMessage is the Bound message of an Auto address while virtualMachineCIDRs is empty: the
// chart's default, with which no machine gets an address (and so none starts).
const NoRangeMessage = "No address can be given: virtualMachineCIDRs (the chart's value, virtualization-controller's --virtual-machine-cidrs) is empty; set it to the subnets of the virtual machines' addresses"

func (r *AddressReconciler) allocate(ctx context.Context, vmip *v1alpha2.VirtualMachineIPAddress, f Facts) (reconcile.Result, error) {
	var leases v1alpha2.VirtualMachineIPAddressLeaseList
	if err := r.client.List(ctx, &leases); err != nil {
		return reconcile.Result{}, fmt.Errorf("list leases: %w", err)
	}
	taken := make(map[netip.Addr]bool, len(leases.Items))
	for _, l := range leases.Items {
		if a, err := ipam.ParseLeaseName(l.Name); err == nil {
			taken[a] = true
		}
	}
	for range allocateAttempts {
		addr, err := r.rng.Free(taken)
		if errors.Is(err, ipam.ErrExhausted) {
			msg, reason := fmt.Sprintf("No free address is left in the range %s", r.rng), "AddressExhausted"
			if r.rng.Empty() {
				msg, reason = NoRangeMessage, "NoVirtualMachineCIDRs"
			}
			r.recorder.Eventf(vmip, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", msg)
			return reconcile.Result{RequeueAfter: 30 * time.Second}, r.setStatus(ctx, vmip,
				PendingStatus(vmip, vmipcondition.VirtualMachineIPAddressLeaseNotReady, msg, f.Now))
		}
		err = r.createLease(ctx, vmip, addr)
		if apierrors.IsAlreadyExists(err) {
			taken[addr] = true
			continue
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.setStatus(ctx, vmip, BoundStatus(vmip, addr, f.VirtualMachine, f.Now))
	}
	return reconcile.Result{RequeueAfter: time.Second}, nil
}

// setStatus writes status when it differs, with an Event when the phase changes.
func (r *AddressReconciler) setStatus(ctx context.Context, vmip *v1alpha2.VirtualMachineIPAddress, s v1alpha2.VirtualMachineIPAddressStatus) error {
	if equality.Semantic.DeepEqual(vmip.Status, s) {
		return nil
	}
	old := vmip.Status
	patch := client.MergeFrom(vmip.DeepCopy())
	vmip.Status = s
	if err := r.client.Status().Patch(ctx, vmip, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if old.Phase == s.Phase && old.Address == s.Address {
		return nil
	}
	kind, note := corev1.EventTypeNormal, phaseNote(s)
	if s.Phase == v1alpha2.VirtualMachineIPAddressPhasePending {
		kind = corev1.EventTypeWarning
	}
	r.recorder.Eventf(vmip, nil, kind, string(s.Phase), "Allocate", "%s", note)
	log.FromContext(ctx).Info("phase changed", "from", old.Phase, "to", s.Phase, "address", s.Address)
	return nil
}

func phaseNote(s v1alpha2.VirtualMachineIPAddressStatus) string {
	switch s.Phase {
	case v1alpha2.VirtualMachineIPAddressPhaseAttached:
		return fmt.Sprintf("The address %s is attached to the virtual machine %s", s.Address, s.VirtualMachineName)
	case v1alpha2.VirtualMachineIPAddressPhaseBound:
		return fmt.Sprintf("The address %s is bound", s.Address)
	}
	for _, c := range s.Conditions {
		if c.Status == metav1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return string(s.Phase)
}

func (r *AddressReconciler) now() metav1.Time {
	return metav1.NewTime(r.clock.Now().Truncate(time.Second))
}
