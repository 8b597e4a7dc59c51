package vmi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/kit"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

// Reconciler carries out Decide. It is level-based: every reconcile reads the VMI and its
// launcher Pods afresh, so a missed event or a restart loses nothing.
type Reconciler struct {
	Client client.Client
	// apiReader reads past the cache. Before the controller creates a Pod, or concludes that the
	// Pod is gone, it asks the apiserver: the cache may not show a Pod created a moment ago, and
	// acting on that would start a second launcher or fail a healthy VMI.
	apiReader client.Reader
	// Launcher shapes the launcher Pods.
	Launcher LauncherConfig
	clock    clock.PassiveClock
	// recorder records what the controller does to the VMI's Pods.
	recorder events.EventRecorder
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the VMI controller reading and writing through c and reading past the cache
// through apiReader (mgr.GetAPIReader()), with clk for its clock and rec recording what it does
// to the launcher Pods (mgr.GetEventRecorder(EventSource)).
func NewReconciler(c client.Client, apiReader client.Reader, launcher LauncherConfig, clk clock.PassiveClock, rec events.EventRecorder) *Reconciler {
	return &Reconciler{Client: c, apiReader: apiReader, Launcher: launcher, clock: clk, recorder: rec}
}

// EventSource is the controller's name in the events it records.
const EventSource = "virtualmachineinstance-controller"

// SetupWithManager watches VMIs and the Pods they own; workers VMIs are reconciled at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	if r.Launcher.Image == "" {
		return errors.New("VMI controller: no virt-launcher image")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachineinstance").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&kubevirtv1.VirtualMachineInstance{}).
		Owns(&corev1.Pod{}).
		// Attachment Pods are the launcher Pod's, not the VMI's (hotplug.go).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.attachmentPodVMI)).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	vmi, err := kit.Get[kubevirtv1.VirtualMachineInstance](ctx, r.Client, req.NamespacedName)
	if vmi == nil || err != nil {
		return ctrl.Result{}, err
	}
	pods, err := r.launcherPods(ctx, r.Client, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(pods) == 0 && (vmi.DeletionTimestamp != nil || controllerPhase(vmi.Status.Phase)) {
		// No Pod in the cache is about to create one, fail the VMI or release it: confirm first.
		if pods, err = r.launcherPods(ctx, r.apiReader, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}

	d := Decide(vmi, pods, r.clock.Now())
	wait, err := r.syncClaims(ctx, vmi, &d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait {
		if err := r.writeVMI(ctx, vmi, d); err != nil {
			return ctrl.Result{}, err
		}
		// Claims are not watched: look for the missing one again shortly.
		return ctrl.Result{RequeueAfter: claimRetry}, nil
	}
	switch d.Action {
	case DeletePods:
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
				r.recorder.Eventf(vmi, nil, corev1.EventTypeWarning, "FailedDelete", "Delete", "Error deleting virtual machine pod %s: %v", p.Name, err)
				return ctrl.Result{}, fmt.Errorf("delete launcher pod %s: %w", p.Name, err)
			}
			r.recorder.Eventf(vmi, nil, corev1.EventTypeNormal, "SuccessfulDelete", "Delete", "Deleted virtual machine pod %s", p.Name)
			logger.Info("deleted launcher pod", "pod", p.Name)
		}
		// The Pods' deletion events bring the VMI back here to release it.
		return ctrl.Result{}, nil
	case Release:
		if !controllerutil.ContainsFinalizer(vmi, kubevirtv1.VirtualMachineInstanceFinalizer) {
			return ctrl.Result{}, nil
		}
		patch := client.MergeFromWithOptions(vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(vmi, kubevirtv1.VirtualMachineInstanceFinalizer)
		if err := r.Client.Patch(ctx, vmi, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
		logger.Info("released VMI: no launcher pod left")
		return ctrl.Result{}, nil
	case CreatePod:
		// The Pod holds block claims as devices, which it knows from the claims syncClaims just
		// recorded in d (the VMI's own status gets them only below).
		withClaims := vmi.DeepCopy()
		withClaims.Status.VolumeStatus = d.Status.VolumeStatus
		pod := NewLauncherPod(withClaims, r.Launcher)
		if err := r.Client.Create(ctx, pod); err != nil {
			r.recorder.Eventf(vmi, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "Error creating pod: %v", err)
			return ctrl.Result{}, fmt.Errorf("create launcher pod: %w", err)
		}
		r.recorder.Eventf(vmi, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create", "Created virtual machine pod %s", pod.Name)
		logger.Info("created launcher pod", "pod", pod.Name)
	}
	if vmi.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	claimWait, err := r.syncHotplug(ctx, vmi, launcherpod.Current(pods), &d)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.writeVMI(ctx, vmi, d); err != nil || !claimWait {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: claimRetry}, nil
}

// claimRetry is how soon a VMI waiting for a claim looks for it again.
const claimRetry = 5 * time.Second

// syncClaims records the VMI's claims in d's volume status while the VMI is still the
// controller's, and holds a Pod creation back while one of them does not exist (wait). The claims
// are read only when a Pod is to be made or the status lacks one, and past the cache, so the
// controller needs neither a watch on every claim of the cluster nor more than get.
func (r *Reconciler) syncClaims(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, d *Decision) (wait bool, err error) {
	names := ClaimNames(vmi)
	if len(names) == 0 || vmi.DeletionTimestamp != nil || !controllerPhase(d.Status.Phase) ||
		(d.Action != CreatePod && ClaimsRecorded(vmi)) {
		return false, nil
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	missing := ""
	for _, name := range names {
		pvc, err := kit.Get[corev1.PersistentVolumeClaim](ctx, r.apiReader, client.ObjectKey{Namespace: vmi.Namespace, Name: name})
		switch {
		case err != nil:
			return false, fmt.Errorf("get claim %s: %w", name, err)
		case pvc == nil:
			if missing == "" {
				missing = name
			}
		default:
			claims[name] = pvc
		}
	}
	d.Status.VolumeStatus = VolumeStatus(vmi, d.Status.VolumeStatus, claims)
	if missing != "" && d.Action == CreatePod {
		d.Action = Nothing
		d.Status.Conditions = vmicond.Set(d.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
			Type: kubevirtv1.VirtualMachineInstanceSynchronized, Status: corev1.ConditionFalse,
			Reason: ReasonPVCNotFound, Message: missingClaimMessage(vmi.Namespace, missing),
		}, r.clock.Now())
		log.FromContext(ctx).Info("waiting for a claim before creating the launcher pod", "claim", missing)
		return true, nil
	}
	if c := vmicond.Get(d.Status.Conditions, kubevirtv1.VirtualMachineInstanceSynchronized); c != nil && c.Reason == ReasonPVCNotFound {
		d.Status.Conditions = vmicond.Remove(d.Status.Conditions, kubevirtv1.VirtualMachineInstanceSynchronized)
	}
	return false, nil
}

// launcherPods lists the VMI's launcher Pods through reader: only those it controls, so that a
// copied label never makes the controller adopt or delete somebody else's Pod.
func (r *Reconciler) launcherPods(ctx context.Context, reader client.Reader, vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Pod, error) {
	pods, err := launcherpod.List(ctx, reader, vmi, nil)
	if err != nil {
		return nil, fmt.Errorf("list launcher pods: %w", err)
	}
	return pods, nil
}

// writeVMI stores the decided status, the finalizer and the node label in one update. The VMI
// has no status subresource, so the whole object goes, guarded by its resourceVersion: a
// conflicting write (virt-handler's, a user's) makes the reconcile start over from fresh state.
func (r *Reconciler) writeVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, d Decision) error {
	updated := vmi.DeepCopy()
	updated.Status = d.Status
	controllerutil.AddFinalizer(updated, kubevirtv1.VirtualMachineInstanceFinalizer)
	if d.NodeName != "" {
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		updated.Labels[kubevirtv1.NodeNameLabel] = d.NodeName
	}
	if equality.Semantic.DeepEqual(vmi, updated) {
		return nil
	}
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("update VMI: %w", err)
	}
	if updated.Status.Phase != vmi.Status.Phase {
		log.FromContext(ctx).Info("VMI phase changed", "from", vmi.Status.Phase, "to", updated.Status.Phase, "node", updated.Status.NodeName)
	}
	return nil
}
