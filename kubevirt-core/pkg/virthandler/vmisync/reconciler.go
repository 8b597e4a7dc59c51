// Package vmisync is virt-handler's VMI controller: for every VMI placed on its node it hands the
// VMI to the launcher, asks for a graceful shutdown when the VMI is deleted, and writes what the
// launcher reports back into the VMI (phase, conditions, interfaces) and the launcher Pod's
// readiness gate.
package vmisync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/d8virt/kubevirt-core/pkg/kit"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/launcherconn"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/vmistatus"
)

// socketPoll is how often a VMI whose launcher has not opened its socket yet is looked at again.
const socketPoll = 250 * time.Millisecond

// Reconciler syncs the VMIs of one node.
type Reconciler struct {
	Client   client.Client
	NodeName string
	// PodsDir is the kubelet's pods directory on this node, where the launcher Pods' volumes are.
	PodsDir string
	Conns   *launcherconn.Manager
	// Events carries the launchers' status changes into the controller's queue.
	Events chan event.GenericEvent
	// TargetVMIs is a cache of the VMIs labelled kubevirt.io/migrationTargetNodeName=NodeName:
	// the ones migrating here, which the manager's cache (this node's VMIs) does not hold. nil
	// means this handler is never a migration target.
	TargetVMIs cache.Cache
	// Hotplug brings hotplugged volumes into the launchers (hotplug.go); nil leaves them alone.
	Hotplug *hotplug.Volumes
	clock   clock.PassiveClock
	// recorder records KubeVirt's events about the VMIs (events.go).
	recorder events.EventRecorder
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the VMI controller of node nodeName, whose launcher Pods' volumes are under
// podsDir, reading and writing through c, with clk for its clock and rec recording KubeVirt's
// events about the VMIs (mgr.GetEventRecorder(EventSource)). Its connections to the launchers
// (Conns, logging to log) feed the launchers' status changes into Events.
func NewReconciler(c client.Client, nodeName, podsDir string, clk clock.PassiveClock, rec events.EventRecorder, log *slog.Logger) *Reconciler {
	r := &Reconciler{Client: c, NodeName: nodeName, PodsDir: podsDir, Events: make(chan event.GenericEvent, 64), clock: clk, recorder: rec}
	r.Conns = launcherconn.New(r.NotifyFunc(), log)
	return r
}

// NotifyFunc is the launcherconn.Notify that feeds r.Events.
func (r *Reconciler) NotifyFunc() launcherconn.Notify {
	return func(key types.NamespacedName) {
		obj := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		r.Events <- event.GenericEvent{Object: obj}
	}
}

// SetupWithManager watches the node's VMIs, its launcher Pods and the launchers' status changes,
// syncing up to workers VMIs at once. The manager's cache must already be restricted to this
// node (see cmd/virt-handler).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.NodeName == "" || r.PodsDir == "" || r.Conns == nil || r.Events == nil {
		return errors.New("virt-handler VMI controller: node name, pods dir, connections and events are required")
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("virt-handler-vmi").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&kubevirtv1.VirtualMachineInstance{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &kubevirtv1.VirtualMachineInstance{}, handler.OnlyControllerOwner())).
		WatchesRawSource(source.Channel(r.Events, &handler.EnqueueRequestForObject{}))
	if r.TargetVMIs != nil {
		b = b.WatchesRawSource(source.Kind(r.TargetVMIs, &kubevirtv1.VirtualMachineInstance{},
			&handler.TypedEnqueueRequestForObject[*kubevirtv1.VirtualMachineInstance]{}))
	}
	return b.Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	v, err := r.getVMI(ctx, req.NamespacedName)
	if v == nil || err != nil {
		// Gone: its launcher Pods go with it, and their connections with them (below, on the
		// Pod's own events there is no VMI left to look at, so drop them here).
		return ctrl.Result{}, err
	}
	if vmistatus.MigrationTarget(v, r.NodeName) {
		return r.reconcileTarget(ctx, v)
	}
	pod, err := r.launcherPod(ctx, v)
	if err != nil {
		return ctrl.Result{}, err
	}
	if v.Status.NodeName != r.NodeName || !vmistatus.Handled(v.Status.Phase) {
		if pod != nil && vmistatus.Final(v.Status.Phase) {
			r.Conns.Close(pod.UID)
		}
		return ctrl.Result{}, nil
	}

	var dom *launcherapi.DomainStatus
	var requeue time.Duration
	if pod != nil && pod.Status.Phase == corev1.PodRunning {
		dom, requeue, err = r.drive(ctx, v, pod)
		if err != nil {
			r.record(v, syncFailedEvent(err))
			return ctrl.Result{}, err
		}
	} else if pod != nil {
		dom = r.Conns.Latest(pod.UID)
	}

	st := vmistatus.Compute(v, pod, dom, r.clock.Now())
	hotplugErr := r.syncHotplug(ctx, v, pod, dom, &st)
	if err := r.writeStatus(ctx, v, st, vmistatus.Annotations(v, dom)); err != nil {
		return ctrl.Result{}, err
	}
	if pod != nil && st.Phase == kubevirtv1.Running {
		if err := r.syncReadinessGate(ctx, pod, st); err != nil {
			return ctrl.Result{}, err
		}
	}
	if vmistatus.Final(st.Phase) && pod != nil {
		r.Conns.Close(pod.UID)
	}
	if hotplugErr != nil {
		// The status written holds what did succeed; the rest is retried with back-off.
		return ctrl.Result{}, hotplugErr
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// drive talks to the launcher: it delivers the VMI the first time and asks for a shutdown once
// the VMI is being deleted. It returns the domain's latest status.
func (r *Reconciler) drive(ctx context.Context, v *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) (*launcherapi.DomainStatus, time.Duration, error) {
	socket := SocketPath(r.PodsDir, pod)
	c, err := r.Conns.Ensure(pod.UID, types.NamespacedName{Namespace: v.Namespace, Name: v.Name}, socket)
	if errors.Is(err, launcherconn.ErrNoSocket) {
		return nil, socketPoll, nil
	}
	if err != nil {
		return nil, 0, err
	}
	dom := r.Conns.Latest(pod.UID)
	if dom != nil && dom.Result != nil {
		return dom, 0, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if v.DeletionTimestamp != nil {
		grace := launcherpod.GracePeriodSeconds(v)
		if err := c.Shutdown(callCtx, &launcherapi.ShutdownRequest{GracePeriodSeconds: grace}); err != nil {
			return dom, 0, fmt.Errorf("shut down %s/%s: %w", v.Namespace, v.Name, err)
		}
		r.recordCommand(v, pod, shutdownEvent.reason, shutdownEvent)
		return dom, 0, nil
	}
	if dom == nil || !dom.Defined {
		st, err := c.Sync(callCtx, &launcherapi.SyncRequest{VMI: v})
		if err != nil {
			return dom, 0, fmt.Errorf("sync %s/%s to its launcher: %w", v.Namespace, v.Name, err)
		}
		log.FromContext(ctx).Info("handed VMI to its launcher", "pod", pod.Name, "state", st.State)
		if st.Defined {
			r.recordCommand(v, pod, definedEvent.reason, definedEvent)
		}
		if dom == nil {
			dom = st
		}
	}
	dom, err = r.driveSource(callCtx, v, pod, c, dom)
	return dom, 0, err
}

// getVMI reads the VMI from this node's VMIs, else from those migrating here; nil when it is in
// neither.
func (r *Reconciler) getVMI(ctx context.Context, key types.NamespacedName) (*kubevirtv1.VirtualMachineInstance, error) {
	v, err := kit.Get[kubevirtv1.VirtualMachineInstance](ctx, r.Client, key)
	if v == nil && err == nil && r.TargetVMIs != nil {
		v, err = kit.Get[kubevirtv1.VirtualMachineInstance](ctx, r.TargetVMIs, key)
	}
	if err != nil {
		return nil, fmt.Errorf("get VMI: %w", err)
	}
	return v, nil
}

// SocketPath is the launcher's command socket in the Pod's sockets volume on this node.
func SocketPath(podsDir string, pod *corev1.Pod) string {
	return launcherapi.PodVolumeDir(podsDir, string(pod.UID), launcherapi.SocketsVolume) + "/" + launcherapi.SocketName
}

// launcherPod is the VMI's current launcher Pod on this node, nil if there is none.
func (r *Reconciler) launcherPod(ctx context.Context, v *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	own, err := r.ownPods(ctx, v)
	if err != nil {
		return nil, err
	}
	return launcherpod.Current(own), nil
}

// ownPods are the VMI's launcher Pods on this node.
func (r *Reconciler) ownPods(ctx context.Context, v *kubevirtv1.VirtualMachineInstance) ([]corev1.Pod, error) {
	own, err := launcherpod.List(ctx, r.Client, v, func(p *corev1.Pod) bool { return p.Spec.NodeName == r.NodeName })
	if err != nil {
		return nil, fmt.Errorf("list launcher pods: %w", err)
	}
	return own, nil
}

// writeStatus stores the status and annotations (the launcher's versions) with the VMI's
// resourceVersion: the VMI has no status subresource, and a concurrent write (virt-controller's,
// a user's) must make this sync start over.
func (r *Reconciler) writeStatus(ctx context.Context, v *kubevirtv1.VirtualMachineInstance, st kubevirtv1.VirtualMachineInstanceStatus, annotations map[string]string) error {
	if equality.Semantic.DeepEqual(v.Status, st) && maps.Equal(v.Annotations, annotations) {
		return nil
	}
	updated := v.DeepCopy()
	updated.Status, updated.Annotations = st, annotations
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("update VMI status: %w", err)
	}
	if st.Phase != v.Status.Phase {
		log.FromContext(ctx).Info("VMI phase changed", "from", v.Status.Phase, "to", st.Phase)
	}
	for _, e := range statusEvents(v.Status, st) {
		r.record(updated, e)
	}
	return nil
}

// syncReadinessGate sets the launcher Pod's kubevirt.io/virtual-machine-unpaused condition, so
// that a paused VM's Pod is not Ready and leaves its Services.
func (r *Reconciler) syncReadinessGate(ctx context.Context, pod *corev1.Pod, st kubevirtv1.VirtualMachineInstanceStatus) error {
	want := corev1.ConditionTrue
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstancePaused && c.Status == corev1.ConditionTrue {
			want = corev1.ConditionFalse
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineUnpaused && c.Status == want {
			return nil
		}
	}
	updated := pod.DeepCopy()
	cond := corev1.PodCondition{Type: kubevirtv1.VirtualMachineUnpaused, Status: want, LastTransitionTime: metav1.NewTime(r.clock.Now())}
	replaced := false
	for i, c := range updated.Status.Conditions {
		if c.Type == cond.Type {
			updated.Status.Conditions[i] = cond
			replaced = true
		}
	}
	if !replaced {
		updated.Status.Conditions = append(updated.Status.Conditions, cond)
	}
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("set readiness gate of pod %s: %w", pod.Name, err)
	}
	return nil
}
