package replicaset

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/kit"
)

// Reconciler carries out Decide and writes Status. It is level-based: every reconcile counts the
// replica set's VMIs afresh, so a missed event or a restart loses nothing.
type Reconciler struct {
	Client client.Client
	// apiReader reads past the cache. Before creating or deleting VMIs the controller counts
	// them again at the apiserver: the cache may not yet show the VMIs the previous reconcile
	// created, and trusting it would overshoot (KubeVirt keeps "expectations" for the same
	// reason).
	apiReader client.Reader
	// BurstReplicas caps the VMIs created or deleted per reconcile; 0 means DefaultBurstReplicas.
	BurstReplicas int
	clock         clock.PassiveClock
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the replica set controller reading and writing through c and reading past
// the cache through apiReader (mgr.GetAPIReader()), with clk for its clock.
func NewReconciler(c client.Client, apiReader client.Reader, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{Client: c, apiReader: apiReader, clock: clk}
}

// SetupWithManager watches replica sets and the VMIs they control.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineinstancereplicaset").
		For(&kubevirtv1.VirtualMachineInstanceReplicaSet{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	rs, err := kit.Get[kubevirtv1.VirtualMachineInstanceReplicaSet](ctx, r.Client, req.NamespacedName)
	if rs == nil || err != nil {
		return ctrl.Result{}, err
	}
	sel, err := Selector(rs)
	if err != nil {
		// Retrying cannot help; an edit of the spec brings the replica set back.
		logger.Error(err, "invalid replica set, not scaling")
		return ctrl.Result{}, nil
	}
	vmis, err := r.ownedVMIs(ctx, r.Client, rs)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := Decide(rs, vmis, r.BurstReplicas)
	if !plan.Empty() {
		// Confirm at the apiserver before acting, see apiReader.
		if vmis, err = r.ownedVMIs(ctx, r.apiReader, rs); err != nil {
			return ctrl.Result{}, err
		}
		plan = Decide(rs, vmis, r.BurstReplicas)
	}
	scaleErr := r.carryOut(ctx, rs, plan)
	if err := r.writeStatus(ctx, rs, vmis, sel, plan, scaleErr); err != nil {
		return ctrl.Result{}, errors.Join(scaleErr, err)
	}
	// The VMIs' events bring the replica set back to count what this reconcile changed.
	return ctrl.Result{}, scaleErr
}

// ownedVMIs lists the VMIs the replica set controls; a VMI that merely matches the selector
// belongs to somebody else.
func (r *Reconciler) ownedVMIs(ctx context.Context, reader client.Reader, rs *kubevirtv1.VirtualMachineInstanceReplicaSet) ([]*kubevirtv1.VirtualMachineInstance, error) {
	var list kubevirtv1.VirtualMachineInstanceList
	if err := reader.List(ctx, &list, client.InNamespace(rs.Namespace)); err != nil {
		return nil, fmt.Errorf("list VMIs: %w", err)
	}
	var out []*kubevirtv1.VirtualMachineInstance
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], rs) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// carryOut creates and deletes VMIs one at a time: the first error stops the pass, which is
// retried with backoff, rather than repeating a failing request burst times.
func (r *Reconciler) carryOut(ctx context.Context, rs *kubevirtv1.VirtualMachineInstanceReplicaSet, plan Plan) error {
	logger := log.FromContext(ctx)
	for range plan.Create {
		vmi := NewVMI(rs)
		if err := r.Client.Create(ctx, vmi); err != nil {
			return fmt.Errorf("create VMI: %w", err)
		}
		logger.Info("created VMI", "vmi", vmi.Name)
	}
	for _, vmi := range plan.Delete {
		if err := r.Client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete VMI %s: %w", vmi.Name, err)
		}
		logger.Info("deleted VMI", "vmi", vmi.Name, "phase", vmi.Status.Phase)
	}
	return nil
}

// writeStatus stores the status through the status subresource, guarded by the resourceVersion:
// a conflicting write (a scale request) makes the reconcile start over with the new spec.
func (r *Reconciler) writeStatus(ctx context.Context, rs *kubevirtv1.VirtualMachineInstanceReplicaSet, vmis []*kubevirtv1.VirtualMachineInstance,
	sel labels.Selector, plan Plan, scaleErr error) error {
	// The VMIs just created or deleted are counted by the reconcile their events trigger.
	st := Status(rs, vmis, sel, plan, scaleErr, r.clock.Now())
	if equality.Semantic.DeepEqual(rs.Status, st) {
		return nil
	}
	updated := rs.DeepCopy()
	updated.Status = st
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("update replica set status: %w", err)
	}
	if st.Replicas != rs.Status.Replicas || st.ReadyReplicas != rs.Status.ReadyReplicas {
		log.FromContext(ctx).Info("replica set status", "replicas", st.Replicas, "ready", st.ReadyReplicas, "desired", Replicas(rs))
	}
	return nil
}
