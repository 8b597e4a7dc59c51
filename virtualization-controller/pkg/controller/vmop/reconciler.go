package vmop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
)

// progressInterval is how often a running migration's progress is computed again.
const progressInterval = 2 * time.Second

// EventSource is the controller's name in the events it records.
const EventSource = "virtualmachineoperation-controller"

// IndexVirtualMachineName is the field index of operations by spec.virtualMachineName.
const IndexVirtualMachineName = "spec.virtualMachineName"

// IndexByVirtualMachineName is the index function of IndexVirtualMachineName.
func IndexByVirtualMachineName(obj client.Object) []string {
	return []string{obj.(*v1alpha2.VirtualMachineOperation).Spec.VirtualMachineName}
}

// errNoInternalVM is the signal's failure when the internal VM does not exist (yet).
var errNoInternalVM = errors.New("the internal VirtualMachine does not exist")

// Reconciler carries out Decide, one step per reconcile. It reaches the kubevirt.io objects
// through the client (the controller's kube-api-rewriter sidecar renames them).
type Reconciler struct {
	client client.Client
	// apiReader reads an operation past the cache before its signal goes out: a cache that
	// lags behind the operation's own status write would send the signal again.
	apiReader client.Reader
	clock     clock.PassiveClock
	recorder  events.EventRecorder
}

// NewReconciler wires a Reconciler.
func NewReconciler(c client.Client, apiReader client.Reader, clk clock.PassiveClock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, clock: clk, recorder: recorder}
}

// SetupWithManager indexes operations by machine and watches them, their machines, the
// internal VMIs and the operations' migrations.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha2.VirtualMachineOperation{}, IndexVirtualMachineName, IndexByVirtualMachineName); err != nil {
		return fmt.Errorf("index operations by machine: %w", err)
	}
	byMachine := handler.EnqueueRequestsFromMapFunc(r.operationsOfMachine)
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha2.VirtualMachineOperation{}).
		// An operation's change may let another on the same machine go on (or supersede it).
		Watches(&v1alpha2.VirtualMachineOperation{}, handler.EnqueueRequestsFromMapFunc(r.siblings)).
		Watches(&v1alpha2.VirtualMachine{}, byMachine).
		Watches(&kubevirtv1.VirtualMachineInstance{}, byMachine).
		Owns(&kubevirtv1.VirtualMachineInstanceMigration{}).
		Named("virtualmachineoperation").
		Complete(r)
}

// operationsOfMachine maps a machine (friendly VM or internal VMI) to its operations.
func (r *Reconciler) operationsOfMachine(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, obj.GetNamespace(), obj.GetName())
}

func (r *Reconciler) siblings(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, obj.GetNamespace(), obj.(*v1alpha2.VirtualMachineOperation).Spec.VirtualMachineName)
}

func (r *Reconciler) requests(ctx context.Context, ns, vm string) []reconcile.Request {
	ops, err := r.operations(ctx, ns, vm)
	if err != nil {
		log.FromContext(ctx).Error(err, "list operations", "namespace", ns, "virtualMachine", vm)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(ops))
	for _, op := range ops {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: op.Name}})
	}
	return reqs
}

func (r *Reconciler) operations(ctx context.Context, ns, vm string) ([]v1alpha2.VirtualMachineOperation, error) {
	var list v1alpha2.VirtualMachineOperationList
	if err := r.client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{IndexVirtualMachineName: vm}); err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	return list.Items, nil
}

// Reconcile does the next step for one operation.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	op := &v1alpha2.VirtualMachineOperation{}
	if err := r.client.Get(ctx, req.NamespacedName, op); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	in, err := r.inputs(ctx, op)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(in)
	log.FromContext(ctx).V(1).Info("reconcile", "step", d.Step.String(), "phase", op.Status.Phase, "type", op.Spec.Type, "virtualMachine", op.Spec.VirtualMachineName)
	switch d.Step {
	case StepAddFinalizer:
		patch := client.MergeFrom(op.DeepCopy())
		controllerutil.AddFinalizer(op, Finalizer)
		return ctrl.Result{}, wrap("add finalizer", r.client.Patch(ctx, op, patch))
	case StepRemoveFinalizer:
		patch := client.MergeFrom(op.DeepCopy())
		controllerutil.RemoveFinalizer(op, Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(wrap("remove finalizer", r.client.Patch(ctx, op, patch)))
	case StepStatus:
		return r.requeueWhileMigrating(op, d.Status), r.setStatus(ctx, op, in.VM, d.Status)
	case StepCancel:
		if in.Migration != nil && !in.Migration.IsFinal() {
			if err := r.client.Delete(ctx, in.Migration, client.Preconditions{UID: &in.Migration.UID}); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete migration %s: %w", in.Migration.Name, err)
			}
			log.FromContext(ctx).Info("migration cancelled", "migration", in.Migration.Name)
		}
		return ctrl.Result{}, r.setStatus(ctx, op, in.VM, d.Status)
	case StepExecute:
		if stale, err := r.staleInCache(ctx, op); stale || err != nil {
			// The watch brings the newer operation, which is decided again.
			return ctrl.Result{}, err
		}
		if err := r.execute(ctx, op, in.VMI); err != nil {
			if apierrors.IsConflict(err) {
				// The internal VM changed under the request; decide again on fresh objects.
				return ctrl.Result{}, fmt.Errorf("send %s: %w", op.Spec.Type, err)
			}
			r.recorder.Eventf(op, nil, corev1.EventTypeWarning, "SignalFailed", string(op.Spec.Type), "Sending signal %q to VirtualMachine %s: %v", op.Spec.Type, op.Spec.VirtualMachineName, err)
			return ctrl.Result{}, r.setStatus(ctx, op, in.VM, SignalFailed(op, err, r.clock.Now()))
		}
		r.recorder.Eventf(in.VM, op, corev1.EventTypeNormal, string(op.Spec.Type), string(op.Spec.Type), "%s initiated with VirtualMachineOperation %s", op.Spec.Type, op.Name)
		return r.requeueWhileMigrating(op, d.Status), r.setStatus(ctx, op, in.VM, d.Status)
	}
	return ctrl.Result{}, nil
}

// staleInCache reports whether the apiserver holds a newer operation than the cache's op (its
// status written by an earlier reconcile the cache has not seen yet).
func (r *Reconciler) staleInCache(ctx context.Context, op *v1alpha2.VirtualMachineOperation) (bool, error) {
	fresh := &v1alpha2.VirtualMachineOperation{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(op), fresh); err != nil {
		return false, client.IgnoreNotFound(wrap("read the operation past the cache", err))
	}
	return fresh.ResourceVersion != op.ResourceVersion, nil
}

// requeueWhileMigrating asks for another look while a migration runs: its progress grows with
// time, not only with the migration's writes.
func (r *Reconciler) requeueWhileMigrating(op *v1alpha2.VirtualMachineOperation, st v1alpha2.VirtualMachineOperationStatus) ctrl.Result {
	if isMigration(op) && st.Phase == v1alpha2.VMOPPhaseInProgress {
		return ctrl.Result{RequeueAfter: progressInterval}
	}
	return ctrl.Result{}
}

func (r *Reconciler) inputs(ctx context.Context, op *v1alpha2.VirtualMachineOperation) (Inputs, error) {
	in := Inputs{Op: op, Now: r.clock.Now()}
	key := types.NamespacedName{Namespace: op.Namespace, Name: op.Spec.VirtualMachineName}
	var err error
	if in.VM, err = get(ctx, r.client, key, &v1alpha2.VirtualMachine{}); err != nil {
		return in, err
	}
	if in.VMI, err = get(ctx, r.client, key, &kubevirtv1.VirtualMachineInstance{}); err != nil {
		return in, err
	}
	mig, err := get(ctx, r.client, types.NamespacedName{Namespace: op.Namespace, Name: MigrationName(op)}, &kubevirtv1.VirtualMachineInstanceMigration{})
	if err != nil {
		return in, err
	}
	if mig != nil && metav1.IsControlledBy(mig, op) {
		in.Migration = mig
	}
	ops, err := r.operations(ctx, op.Namespace, op.Spec.VirtualMachineName)
	if err != nil {
		return in, err
	}
	in.Others = slices.DeleteFunc(ops, func(o v1alpha2.VirtualMachineOperation) bool { return o.Name == op.Name })
	return in, nil
}

func get[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var none T
	err := c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, fmt.Errorf("get %T %s: %w", obj, key, err)
	}
	return obj, nil
}

// execute sends the operation's signal, as the reference module does: Start and Restart append
// to the internal VM's status.stateChangeRequests (what the core's start and restart subresources
// do), Stop deletes the VMI, force also deletes its launcher Pods at once, and Migrate and Evict
// create a VirtualMachineInstanceMigration owned by the operation.
func (r *Reconciler) execute(ctx context.Context, op *v1alpha2.VirtualMachineOperation, vmi *kubevirtv1.VirtualMachineInstance) error {
	force := ptr.Deref(op.Spec.Force, false)
	switch op.Spec.Type {
	case v1alpha2.VMOPTypeStart:
		return r.requestStateChange(ctx, op, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	case v1alpha2.VMOPTypeStop:
		if vmi == nil {
			return nil
		}
		if err := r.client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete VMI: %w", err)
		}
		if force {
			return r.killLaunchers(ctx, vmi)
		}
		return nil
	case v1alpha2.VMOPTypeRestart:
		if vmi == nil {
			return r.requestStateChange(ctx, op, kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
		}
		uid := vmi.UID
		if err := r.requestStateChange(ctx, op,
			kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid},
			kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest}); err != nil {
			return err
		}
		if force {
			return r.killLaunchers(ctx, vmi)
		}
		return nil
	case v1alpha2.VMOPTypeMigrate, v1alpha2.VMOPTypeEvict:
		mig := NewMigration(op)
		if err := controllerutil.SetControllerReference(op, mig, r.client.Scheme()); err != nil {
			return fmt.Errorf("own migration: %w", err)
		}
		if err := r.client.Create(ctx, mig); err != nil {
			return fmt.Errorf("create migration %s: %w", mig.Name, err)
		}
		log.FromContext(ctx).Info("migration created", "migration", mig.Name, "vmi", mig.Spec.VMIName)
		return nil
	}
	return fmt.Errorf("spec.type %q is not an operation type", op.Spec.Type)
}

// NewMigration is the VirtualMachineInstanceMigration of a Migrate or Evict.
func NewMigration(op *v1alpha2.VirtualMachineOperation) *kubevirtv1.VirtualMachineInstanceMigration {
	return &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: op.Namespace, Name: MigrationName(op),
			Labels: map[string]string{LabelOperation: op.Name, LabelOperationType: string(op.Spec.Type)},
		},
		Spec: kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: op.Spec.VirtualMachineName},
	}
}

// The labels of an operation's migration.
const (
	LabelOperation     = "virtualization.deckhouse.io/virtual-machine-operation"
	LabelOperationType = "virtualization.deckhouse.io/virtual-machine-operation-type"
)

// requestStateChange appends requests to the internal VM's status.stateChangeRequests; the
// patch carries the resourceVersion read, so a concurrent change makes it conflict instead of
// being lost.
func (r *Reconciler) requestStateChange(ctx context.Context, op *v1alpha2.VirtualMachineOperation, reqs ...kubevirtv1.VirtualMachineStateChangeRequest) error {
	kvvm := &kubevirtv1.VirtualMachine{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: op.Namespace, Name: op.Spec.VirtualMachineName}, kvvm); err != nil {
		if apierrors.IsNotFound(err) {
			return errNoInternalVM
		}
		return fmt.Errorf("get internal VM: %w", err)
	}
	patch := client.MergeFromWithOptions(kvvm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	kvvm.Status.StateChangeRequests = append(kvvm.Status.StateChangeRequests, reqs...)
	if err := r.client.Status().Patch(ctx, kvvm, patch); err != nil {
		return fmt.Errorf("request %s of the internal VM: %w", op.Spec.Type, err)
	}
	return nil
}

// killLaunchers deletes the VMI's launcher Pods with no grace period: the guest is killed.
func (r *Reconciler) killLaunchers(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(vmi.Namespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}, client.GracePeriodSeconds(0))
	if err != nil {
		return fmt.Errorf("delete launcher pods of VMI %s: %w", vmi.Name, err)
	}
	return nil
}

// setStatus writes status when it differs, with an Event when the phase changes. The patch
// carries the resourceVersion read: a status decided from a stale operation conflicts instead
// of overwriting a newer one (an InProgress with Failed), and is decided again.
func (r *Reconciler) setStatus(ctx context.Context, op *v1alpha2.VirtualMachineOperation, vm *v1alpha2.VirtualMachine, st v1alpha2.VirtualMachineOperationStatus) error {
	if equality.Semantic.DeepEqual(op.Status, st) {
		return nil
	}
	old := op.Status.Phase
	patch := client.MergeFromWithOptions(op.DeepCopy(), client.MergeFromWithOptimisticLock{})
	op.Status = st
	if err := r.client.Status().Patch(ctx, op, patch); err != nil {
		return client.IgnoreNotFound(wrap("write status", err))
	}
	if old == st.Phase {
		return nil
	}
	kind, note := corev1.EventTypeNormal, fmt.Sprintf("Phase %s", st.Phase)
	if c := completed(st); c != nil && c.Message != "" {
		note += ": " + c.Message
	}
	if st.Phase == v1alpha2.VMOPPhaseFailed {
		kind = corev1.EventTypeWarning
	}
	var related runtime.Object
	if vm != nil {
		related = vm
	}
	r.recorder.Eventf(op, related, kind, string(st.Phase), string(op.Spec.Type), "%s", note)
	log.FromContext(ctx).Info("phase changed", "from", old, "to", st.Phase, "operation", op.Name, "type", op.Spec.Type, "virtualMachine", op.Spec.VirtualMachineName)
	return nil
}

func completed(st v1alpha2.VirtualMachineOperationStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, string(vmopcondition.TypeCompleted))
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
