package vmisync

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/launcherconn"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/vmistatus"
)

// reconcileTarget drives this node's side of a migration whose target it is: the target
// launcher prepares, its address goes into the VMI for the source, and once the guest runs here
// the VMI moves to this node.
func (r *Reconciler) reconcileTarget(ctx context.Context, v *kubevirtv1.VirtualMachineInstance) (ctrl.Result, error) {
	ms := v.Status.MigrationState
	logger := log.FromContext(ctx).WithValues("migration", ms.MigrationUID, "role", launcherapi.MigrationRoleTarget)
	pod, err := r.targetPod(ctx, v)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod == nil || pod.Status.Phase != corev1.PodRunning {
		// The Pod's own events bring the VMI back.
		return ctrl.Result{}, nil
	}
	c, err := r.Conns.Ensure(pod.UID, types.NamespacedName{Namespace: v.Namespace, Name: v.Name}, SocketPath(r.PodsDir, pod))
	if errors.Is(err, launcherconn.ErrNoSocket) {
		return ctrl.Result{RequeueAfter: socketPoll}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	dom := r.Conns.Latest(pod.UID)
	if vmistatus.TargetPrepareNeeded(v, dom) {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		st, err := c.PrepareMigrationTarget(callCtx, &launcherapi.PrepareMigrationTargetRequest{VMI: v, MigrationUID: string(ms.MigrationUID)})
		cancel()
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("prepare migration target %s/%s: %w", v.Namespace, v.Name, err)
		}
		logger.Info("migration target prepared", "pod", pod.Name)
		r.recordCommand(v, pod, targetPreparedEvent.reason+"/"+string(ms.MigrationUID), targetPreparedEvent)
		dom = st
	}
	st, takeOver := vmistatus.Target(v, pod, dom, r.NodeName, r.clock.Now())
	if !takeOver {
		return ctrl.Result{}, r.writeStatus(ctx, v, st, v.Annotations)
	}
	updated := v.DeepCopy()
	updated.Status = st
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	updated.Labels[kubevirtv1.NodeNameLabel] = r.NodeName
	delete(updated.Labels, kubevirtv1.MigrationTargetNodeNameLabel)
	if !equality.Semantic.DeepEqual(v, updated) {
		// Guarded by the resourceVersion, like every status write of the handler.
		if err := r.Client.Update(ctx, updated); err != nil {
			return ctrl.Result{}, fmt.Errorf("take over migrated VMI: %w", err)
		}
		logger.Info("migrated VMI runs on this node now", "from", ms.SourceNode, "pod", pod.Name)
		for _, e := range append(statusEvents(v.Status, st), migratedEvent(r.NodeName)) {
			r.record(updated, e)
		}
	}
	return ctrl.Result{}, r.syncReadinessGate(ctx, pod, st)
}

// targetPod is the migration's target launcher Pod on this node, nil if there is none.
func (r *Reconciler) targetPod(ctx context.Context, v *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	pods, err := r.ownPods(ctx, v)
	if err != nil {
		return nil, err
	}
	ms := v.Status.MigrationState
	for i := range pods {
		p := &pods[i]
		if p.Labels[kubevirtv1.MigrationJobLabel] == string(ms.MigrationUID) && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, nil
}

// driveSource asks the source launcher to migrate, or to cancel, as the VMI's migration state
// says. dom is the launcher's latest status.
func (r *Reconciler) driveSource(ctx context.Context, v *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, c *launcherapi.Client, dom *launcherapi.DomainStatus) (*launcherapi.DomainStatus, error) {
	migrate, cancel := vmistatus.SourceCommand(v, dom)
	if migrate == nil && cancel == nil {
		return dom, nil
	}
	logger := log.FromContext(ctx).WithValues("migration", v.Status.MigrationState.MigrationUID, "role", launcherapi.MigrationRoleSource)
	callCtx, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	if cancel != nil {
		if err := c.CancelMigration(callCtx, cancel); err != nil {
			return dom, fmt.Errorf("cancel migration of %s/%s: %w", v.Namespace, v.Name, err)
		}
		logger.Info("asked the launcher to cancel the migration")
		return dom, nil
	}
	st, err := c.Migrate(callCtx, migrate)
	if err != nil {
		return dom, fmt.Errorf("migrate %s/%s: %w", v.Namespace, v.Name, err)
	}
	logger.Info("migration started", "target", migrate.TargetAddress, "targetNode", v.Status.MigrationState.TargetNode)
	r.recordCommand(v, pod, migratingEvent.reason+"/"+migrate.MigrationUID, migratingEvent)
	return st, nil
}
