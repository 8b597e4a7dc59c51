package migration

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/kit"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vmi"
)

// vmiNameIndex indexes the migration cache by spec.vmiName, so that a VMI's change finds its
// migrations.
const vmiNameIndex = "migrationcontroller.spec.vmiName"

// Reconciler carries out Decide. It is level-based: every reconcile reads the migration, its VMI,
// the VMI's Pods and all migrations afresh, so a missed event or a restart loses nothing.
type Reconciler struct {
	Client client.Client
	// apiReader reads past the cache. Before concluding that the VMI is gone, or creating a target
	// Pod, the controller asks the apiserver: the cache may lag behind a VMI or Pod created a
	// moment ago.
	apiReader client.Reader
	// Launcher shapes the target Pod.
	Launcher vmi.LauncherConfig
	// Limits are the migration limits and timeouts; zero fields take KubeVirt's defaults.
	Limits Limits
	clock  clock.PassiveClock
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the migration controller reading and writing through c and reading past the
// cache through apiReader (mgr.GetAPIReader()), with clk for its clock.
func NewReconciler(c client.Client, apiReader client.Reader, launcher vmi.LauncherConfig, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{Client: c, apiReader: apiReader, Launcher: launcher, clock: clk}
}

// SetupWithManager watches migrations, the VMIs they move and their target Pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Launcher.Image == "" {
		return errors.New("migration controller: no virt-launcher image")
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &kubevirtv1.VirtualMachineInstanceMigration{}, vmiNameIndex, func(o client.Object) []string {
		return []string{o.(*kubevirtv1.VirtualMachineInstanceMigration).Spec.VMIName}
	})
	if err != nil {
		return fmt.Errorf("index migrations by VMI: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineinstancemigration").
		For(&kubevirtv1.VirtualMachineInstanceMigration{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, handler.EnqueueRequestsFromMapFunc(r.migrationsOfVMI)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.GetAnnotations()[kubevirtv1.MigrationJobNameAnnotation]
			if name == "" || o.GetLabels()[kubevirtv1.MigrationJobLabel] == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		})).
		Complete(r)
}

// migrationsOfVMI wakes every unfinished migration of a VMI: its phase, its end or a migration
// state written by virt-handler moves them on.
func (r *Reconciler) migrationsOfVMI(ctx context.Context, o client.Object) []reconcile.Request {
	var list kubevirtv1.VirtualMachineInstanceMigrationList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{vmiNameIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list migrations of VMI", "vmi", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for _, m := range list.Items {
		if !m.IsFinal() || controllerutil.ContainsFinalizer(&m, kubevirtv1.VirtualMachineInstanceMigrationFinalizer) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&m)})
		}
	}
	return out
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	m, err := kit.Get[kubevirtv1.VirtualMachineInstanceMigration](ctx, r.Client, req.NamespacedName)
	if m == nil || err != nil {
		return ctrl.Result{}, err
	}
	in, err := r.read(ctx, r.Client, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(in)
	if NeedsConfirmation(in, d) {
		if in, err = r.read(ctx, r.apiReader, m); err != nil {
			return ctrl.Result{}, err
		}
		d = Decide(in)
	}
	logger = logger.WithValues("vmi", m.Spec.VMIName, "phase", m.Status.Phase)

	if d.Finalizer {
		if err := r.ensureMetadata(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	switch d.Action {
	case CreateTargetPod:
		if err := r.labelSource(ctx, in.VMIPods, d.Status.MigrationState.SourcePod); err != nil {
			return ctrl.Result{}, err
		}
		pod := NewTargetPod(in.VMI, m, r.Launcher)
		if err := r.Client.Create(ctx, pod); err != nil {
			return ctrl.Result{}, fmt.Errorf("create target pod: %w", err)
		}
		logger.Info("created migration target pod", "pod", pod.Name, "sourceNode", in.VMI.Status.NodeName)
	case DeleteTargetPods:
		for _, p := range TargetPods(m, in.VMIPods) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, &p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete target pod %s: %w", p.Name, err)
			}
			logger.Info("deleted migration target pod", "pod", p.Name, "why", d.Message)
		}
	case DeleteSourcePod:
		for _, p := range sourcePods(m, in.VMIPods) {
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, &p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete migration source pod %s: %w", p.Name, err)
			}
			logger.Info("deleted migration source pod", "pod", p.Name, "why", d.Message)
		}
	}
	if d.VMI != nil && in.VMI != nil {
		// Before the migration's status: a phase must never claim a hand-off the VMI lacks. The
		// VMI has no status subresource; its resourceVersion guards the write.
		updated := in.VMI.DeepCopy()
		d.VMI.Apply(updated)
		if !equality.Semantic.DeepEqual(in.VMI, updated) {
			if err := r.Client.Update(ctx, updated); err != nil {
				return ctrl.Result{}, fmt.Errorf("update the VMI's migration state: %w", err)
			}
			logger.V(1).Info("updated the VMI's migration state", "why", d.Message)
		}
	}
	if !equality.Semantic.DeepEqual(m.Status, d.Status) {
		updated := m.DeepCopy()
		updated.Status = d.Status
		// Guarded by the resourceVersion: a concurrent write makes the reconcile start over.
		if err := r.Client.Status().Update(ctx, updated); err != nil {
			return ctrl.Result{}, fmt.Errorf("update migration status: %w", err)
		}
		if d.Status.Phase != m.Status.Phase {
			logger.Info("migration phase changed", "to", d.Status.Phase, "why", d.Message)
		}
		m = updated
	}
	if !d.Finalizer && controllerutil.ContainsFinalizer(m, kubevirtv1.VirtualMachineInstanceMigrationFinalizer) {
		// Only once the final status is stored: deleting the migration must not lose the abort.
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(m, kubevirtv1.VirtualMachineInstanceMigrationFinalizer)
		if err := r.Client.Patch(ctx, m, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
	}
	return ctrl.Result{RequeueAfter: d.Recheck}, nil
}

// labelSource gives the source Pod the source's network priority before the target Pod, which
// will share the VM's requested address, exists.
func (r *Reconciler) labelSource(ctx context.Context, pods []corev1.Pod, name string) error {
	for i := range pods {
		p := &pods[i]
		if p.Name != name || p.Labels[NetworkPriorityLabel] == PrioritySource {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[NetworkPriorityLabel] = PrioritySource
		if err := r.Client.Patch(ctx, p, patch); err != nil {
			return fmt.Errorf("label the source pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// read gathers the decision's input through reader.
func (r *Reconciler) read(ctx context.Context, reader client.Reader, m *kubevirtv1.VirtualMachineInstanceMigration) (Input, error) {
	in := Input{Migration: m, Limits: r.Limits, Now: r.clock.Now()}
	v, err := kit.Get[kubevirtv1.VirtualMachineInstance](ctx, reader, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.VMIName})
	if err != nil {
		return in, fmt.Errorf("get VMI: %w", err)
	}
	in.VMI = v
	if v != nil {
		var pods corev1.PodList
		if err := reader.List(ctx, &pods, client.InNamespace(m.Namespace), client.MatchingLabels(launcherpod.Labels(v.UID))); err != nil {
			return in, fmt.Errorf("list launcher pods: %w", err)
		}
		in.VMIPods = pods.Items
	}
	var ms kubevirtv1.VirtualMachineInstanceMigrationList
	if err := reader.List(ctx, &ms); err != nil {
		return in, fmt.Errorf("list migrations: %w", err)
	}
	in.Migrations = ms.Items
	return in, nil
}

// ensureMetadata puts the finalizer and KubeVirt's kubevirt.io/vmi-name label on an unfinished
// migration, before anything is started that deleting it would have to undo.
func (r *Reconciler) ensureMetadata(ctx context.Context, m *kubevirtv1.VirtualMachineInstanceMigration) error {
	if controllerutil.ContainsFinalizer(m, kubevirtv1.VirtualMachineInstanceMigrationFinalizer) &&
		m.Labels[kubevirtv1.MigrationSelectorLabel] == m.Spec.VMIName {
		return nil
	}
	if m.DeletionTimestamp != nil {
		// A finalizer cannot be added to an object being deleted.
		return nil
	}
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(m, kubevirtv1.VirtualMachineInstanceMigrationFinalizer)
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[kubevirtv1.MigrationSelectorLabel] = m.Spec.VMIName
	if err := r.Client.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}
