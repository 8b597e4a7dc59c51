package vmip

import (
	"context"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

// LeaseReconciler releases the leases whose address is gone and deletes them after the retention
// period.
type LeaseReconciler struct {
	client    client.Client
	apiReader client.Reader
	retention time.Duration
	clock     clock.PassiveClock
	recorder  events.EventRecorder
}

// NewLeaseReconciler wires a LeaseReconciler that keeps released leases for retention.
func NewLeaseReconciler(c client.Client, apiReader client.Reader, retention time.Duration, clk clock.PassiveClock, recorder events.EventRecorder) *LeaseReconciler {
	return &LeaseReconciler{client: c, apiReader: apiReader, retention: retention, clock: clk, recorder: recorder}
}

// SetupWithManager watches leases and the addresses that hold them.
func (r *LeaseReconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).
		For(&v1alpha2.VirtualMachineIPAddressLease{}).
		Watches(&v1alpha2.VirtualMachineIPAddress{}, handler.EnqueueRequestsFromMapFunc(r.addressLeases)).
		Named("virtualmachineipaddresslease").
		Complete(r)
}

// addressLeases are the leases that name an address, and the one of the address it wants.
func (r *LeaseReconciler) addressLeases(ctx context.Context, o client.Object) []reconcile.Request {
	vmip := o.(*v1alpha2.VirtualMachineIPAddress)
	var reqs []reconcile.Request
	if addr := WantedAddress(vmip); addr.IsValid() {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ipam.LeaseName(addr)}})
	}
	var leases v1alpha2.VirtualMachineIPAddressLeaseList
	if err := r.client.List(ctx, &leases, client.MatchingFields{IndexLeaseByRef: AddressKey(vmip)}); err != nil {
		log.FromContext(ctx).Error(err, "list leases of an address", "address", AddressKey(vmip))
		return reqs
	}
	for _, l := range leases.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: l.Name}})
	}
	return reqs
}

// Reconcile does the next step for one lease.
func (r *LeaseReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	lease := &v1alpha2.VirtualMachineIPAddressLease{}
	if err := r.client.Get(ctx, req.NamespacedName, lease); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if lease.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	holder, err := r.holder(ctx, lease)
	if err != nil {
		return reconcile.Result{}, err
	}
	decision, after := DecideLease(lease, holder, r.retention, r.clock.Now())
	switch decision {
	case LeaseRelease:
		ref := *lease.Spec.VirtualMachineIPAddressRef
		lease.Spec.VirtualMachineIPAddressRef = nil
		if err := r.client.Update(ctx, lease); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, fmt.Errorf("release lease: %w", err)
		}
		log.FromContext(ctx).Info("lease released", "lease", lease.Name, "address", ref.Namespace+"/"+ref.Name)
		return reconcile.Result{RequeueAfter: r.retention}, r.setStatus(ctx, lease, LeaseStatus(lease, r.now()))
	case LeaseDelete:
		rv := lease.ResourceVersion
		err := r.client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &rv})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return reconcile.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("delete released lease: %w", err)
		}
		log.FromContext(ctx).Info("released lease deleted after its retention period", "lease", lease.Name)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: after}, r.setStatus(ctx, lease, LeaseStatus(lease, r.now()))
}

// holder is the address the lease names, read past the cache when the cache has none (an
// address just created would otherwise look gone).
func (r *LeaseReconciler) holder(ctx context.Context, lease *v1alpha2.VirtualMachineIPAddressLease) (*v1alpha2.VirtualMachineIPAddress, error) {
	ref := lease.Spec.VirtualMachineIPAddressRef
	if ref == nil {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	vmip := &v1alpha2.VirtualMachineIPAddress{}
	err := r.client.Get(ctx, key, vmip)
	if apierrors.IsNotFound(err) {
		err = r.apiReader.Get(ctx, key, vmip)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get address %s: %w", key, err)
	}
	return vmip, nil
}

func (r *LeaseReconciler) setStatus(ctx context.Context, lease *v1alpha2.VirtualMachineIPAddressLease, s v1alpha2.VirtualMachineIPAddressLeaseStatus) error {
	if equality.Semantic.DeepEqual(lease.Status, s) {
		return nil
	}
	old := lease.Status.Phase
	patch := client.MergeFrom(lease.DeepCopy())
	lease.Status = s
	if err := r.client.Status().Patch(ctx, lease, patch); err != nil {
		return fmt.Errorf("write lease status: %w", err)
	}
	if old != s.Phase {
		r.recorder.Eventf(lease, nil, corev1.EventTypeNormal, string(s.Phase), "Lease", "Lease %s", s.Phase)
	}
	return nil
}

func (r *LeaseReconciler) now() metav1.Time {
	return metav1.NewTime(r.clock.Now().Truncate(time.Second))
}
