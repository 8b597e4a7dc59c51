package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/kit"
)

// vmiNodeIndex indexes the VMI cache by status.nodeName, the node a VMI runs on.
const vmiNodeIndex = "nodecontroller.status.nodeName"

// Reconciler carries out Decide for one Node. It is level-based: every reconcile reads the Node
// and its VMIs afresh and checks the heartbeat against the clock, so a restart loses nothing.
type Reconciler struct {
	Client client.Client
	// apiReader reads past the cache. Before failing VMIs, the controller lists the Pods on the
	// node at the apiserver: a launcher the cache has not seen yet may run a guest.
	apiReader client.Reader
	// HeartbeatTimeout is how old a heartbeat may get; 0 means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// RecheckInterval bounds the time between two looks at a node; 0 means DefaultRecheckInterval.
	RecheckInterval time.Duration
	clock           clock.PassiveClock
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the node controller reading and writing through c and reading past the cache
// through apiReader (mgr.GetAPIReader()), with clk for its clock, which the heartbeats are
// judged by.
func NewReconciler(c client.Client, apiReader client.Reader, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{Client: c, apiReader: apiReader, clock: clk}
}

// SetupWithManager watches Nodes, and VMIs by the node they run on: a VMI that lands on a node
// already known dead must be failed too.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &kubevirtv1.VirtualMachineInstance{}, vmiNodeIndex, func(o client.Object) []string {
		if n := o.(*kubevirtv1.VirtualMachineInstance).Status.NodeName; n != "" {
			return []string{n}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index VMIs by node: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("node").
		For(&corev1.Node{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if n := o.(*kubevirtv1.VirtualMachineInstance).Status.NodeName; n != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: n}}}
			}
			return nil
		})).
		Complete(r)
}

func (r *Reconciler) timeouts() (time.Duration, time.Duration) {
	timeout, recheck := r.HeartbeatTimeout, r.RecheckInterval
	if timeout <= 0 {
		timeout = DefaultHeartbeatTimeout
	}
	if recheck <= 0 {
		recheck = DefaultRecheckInterval
	}
	return timeout, recheck
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	node, err := kit.Get[corev1.Node](ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get node: %w", err)
	}
	var list kubevirtv1.VirtualMachineInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{vmiNodeIndex: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list VMIs on node: %w", err)
	}
	vmis := make([]*kubevirtv1.VirtualMachineInstance, 0, len(list.Items))
	for i := range list.Items {
		vmis = append(vmis, &list.Items[i])
	}

	timeout, recheck := r.timeouts()
	now := r.clock.Now()
	d, err := Decide(node, vmis, nil, timeout, recheck, now)
	if err != nil {
		logger.Error(err, "cannot read the heartbeat, not judging the node")
		return ctrl.Result{RequeueAfter: recheck}, nil
	}
	if len(d.Fail) > 0 {
		// Only now is it worth asking the apiserver which launchers still live on the node.
		var pods corev1.PodList
		if err := r.apiReader.List(ctx, &pods, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("spec.nodeName", req.Name)}); err != nil {
			return ctrl.Result{}, fmt.Errorf("list pods on node: %w", err)
		}
		if d, err = Decide(node, vmis, pods.Items, timeout, recheck, now); err != nil {
			return ctrl.Result{}, err
		}
	}
	if d.MarkUnschedulable {
		patch := client.MergeFrom(node.DeepCopy())
		node.Labels[kubevirtv1.NodeSchedulable] = "false"
		if err := r.Client.Patch(ctx, node, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("mark node unschedulable: %w", err)
		}
		logger.Info("virt-handler is not responsive, marked node unschedulable", "heartbeatTimeout", timeout)
	}
	var errs []error
	// One at a time: when a node dies, the cluster has enough to do without an update storm.
	for _, vmi := range d.Fail {
		updated := vmi.DeepCopy()
		updated.Status = FailedStatus(vmi, now)
		// The VMI has no status subresource; the resourceVersion guards against overwriting a
		// write this controller has not seen.
		if err := r.Client.Update(ctx, updated); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("fail VMI %s/%s: %w", vmi.Namespace, vmi.Name, err))
			continue
		}
		logger.Info("failed VMI on unresponsive node", "vmi", client.ObjectKeyFromObject(vmi), "reason", ReasonNodeUnresponsive)
	}
	return ctrl.Result{RequeueAfter: d.Recheck}, errors.Join(errs...)
}
