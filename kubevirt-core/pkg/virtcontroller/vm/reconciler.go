package vm

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/kit"
)

// Reconciler carries out Decide and writes Status. It is level-based: every reconcile reads the
// VM and its VMI afresh, so a missed event or a restart loses nothing.
type Reconciler struct {
	Client   client.Client
	clock    clock.PassiveClock
	recorder events.EventRecorder
}

var _ reconcile.Reconciler = &Reconciler{}

// NewReconciler is the VM controller reading and writing through c, with clk for its clock and
// rec recording what it does to the VMs' VMIs (mgr.GetEventRecorder(EventSource)).
func NewReconciler(c client.Client, clk clock.PassiveClock, rec events.EventRecorder) *Reconciler {
	return &Reconciler{Client: c, clock: clk, recorder: rec}
}

// EventSource is the controller's name in the events it records.
const EventSource = "virtualmachine-controller"

// SetupWithManager watches VMs and the VMIs they own; workers VMs are reconciled at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachine").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		For(&kubevirtv1.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachineInstance{}).
		Complete(r)
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	vm, err := kit.Get[kubevirtv1.VirtualMachine](ctx, r.Client, req.NamespacedName)
	if vm == nil || err != nil {
		return ctrl.Result{}, err
	}
	vmi, err := kit.Get[kubevirtv1.VirtualMachineInstance](ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get VMI: %w", err)
	}
	if vmi != nil && !metav1.IsControlledBy(vmi, vm) {
		// Somebody else's VMI of the same name: never touch it.
		return ctrl.Result{}, fmt.Errorf("VMI %s exists and is not controlled by this VM", req.NamespacedName)
	}

	if deleting(vmi) && controllerutil.ContainsFinalizer(vmi, kubevirtv1.VirtualMachineControllerFinalizer) {
		// The VMI's last state has been seen (start failures are counted from it): let it go.
		patch := client.MergeFromWithOptions(vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(vmi, kubevirtv1.VirtualMachineControllerFinalizer)
		if err := r.Client.Patch(ctx, vmi, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("release VMI: %w", err)
		}
	}
	if vm.DeletionTimestamp == nil && !controllerutil.ContainsFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer) {
		patch := client.MergeFrom(vm.DeepCopy())
		controllerutil.AddFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer)
		if err := r.Client.Patch(ctx, vm, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	now := r.clock.Now()
	strategy, err := vm.RunStrategy()
	if err != nil {
		// The webhook rejects such a VM; one that predates it waits here for a fix.
		return ctrl.Result{}, r.writeStatus(ctx, vm, vmi, strategy, Decision{}, now)
	}
	volumesApplied, err := r.applyVolumeRequests(ctx, vm, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(vm, vmi, strategy, now)
	d.VolumeRequestsApplied = volumesApplied
	var requeue time.Duration
	switch d.Action {
	case Create:
		if wait := d.NotBefore.Sub(now); wait > 0 {
			requeue = wait
			d = Decision{VolumeRequestsApplied: d.VolumeRequestsApplied}
			break
		}
		vmi = NewVMI(vm)
		if d.StartPaused {
			paused := kubevirtv1.StartStrategyPaused
			vmi.Spec.StartStrategy = &paused
		}
		if err := r.Client.Create(ctx, vmi); err != nil && !apierrors.IsAlreadyExists(err) {
			r.recorder.Eventf(vm, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "Error creating virtual machine instance: %v", err)
			return ctrl.Result{}, fmt.Errorf("create VMI: %w", err)
		} else if err == nil {
			r.recorder.Eventf(vm, nil, corev1.EventTypeNormal, "SuccessfulCreate", "Create",
				"Started the virtual machine by creating the new virtual machine instance %s", vmi.Name)
		}
		logger.Info("created VMI", "runStrategy", strategy)
	case Delete:
		if err := r.Client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID}); client.IgnoreNotFound(err) != nil {
			r.recorder.Eventf(vm, nil, corev1.EventTypeWarning, "FailedDelete", "Delete", "Error deleting virtual machine instance %s: %v", vmi.Name, err)
			return ctrl.Result{}, fmt.Errorf("delete VMI: %w", err)
		}
		r.recorder.Eventf(vm, nil, corev1.EventTypeNormal, "SuccessfulDelete", "Delete",
			"Stopped the virtual machine by deleting the virtual machine instance %s", vmi.UID)
		logger.Info("deleted VMI", "runStrategy", strategy)
	case Halt:
		halted := kubevirtv1.RunStrategyHalted
		patch := client.MergeFrom(vm.DeepCopy())
		vm.Spec.RunStrategy, vm.Spec.Running = &halted, nil
		if err := r.Client.Patch(ctx, vm, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("halt VM after its only run: %w", err)
		}
	case Run:
		patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if vm.Spec.RunStrategy != nil {
			always := kubevirtv1.RunStrategyAlways
			vm.Spec.RunStrategy = &always
		} else {
			on := true
			vm.Spec.Running = &on
		}
		if err := r.Client.Patch(ctx, vm, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("switch VM on for its start request: %w", err)
		}
		logger.Info("switched VM on for a start request")
	}
	if err := r.writeStatus(ctx, vm, vmi, strategy, d, now); err != nil {
		return ctrl.Result{}, err
	}
	if vm.DeletionTimestamp != nil && vmi == nil {
		return ctrl.Result{}, r.releaseVM(ctx, vm)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *Reconciler) writeStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance,
	strategy kubevirtv1.VirtualMachineRunStrategy, d Decision, now time.Time) error {
	st := Status(vm, vmi, strategy, d, now)
	if equalStatus(vm.Status, st) {
		return nil
	}
	// Optimistic concurrency: a conflicting write (a new state change request) retries the whole
	// reconcile, so no request is ever dropped.
	updated := vm.DeepCopy()
	updated.Status = st
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("update VM status: %w", err)
	}
	return nil
}

// releaseVM lets a deleted VM go once its VMI is gone.
func (r *Reconciler) releaseVM(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if !controllerutil.ContainsFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer)
	if err := r.Client.Patch(ctx, vm, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
