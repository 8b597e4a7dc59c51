package vmclass

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// EventSource is the controller's name in the events it records.
const EventSource = "virtualmachineclass-controller"

// Reconciler keeps a class's status and its finalizer.
type Reconciler struct {
	client   client.Client
	clock    clock.PassiveClock
	recorder events.EventRecorder
}

// NewReconciler wires a Reconciler.
func NewReconciler(c client.Client, clk clock.PassiveClock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, clock: clk, recorder: recorder}
}

// SetupWithManager watches classes, Nodes (every class) and VMs (their class).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha3.VirtualMachineClass{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allClasses)).
		Watches(&v1alpha2.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name := o.(*v1alpha2.VirtualMachine).Spec.VirtualMachineClassName
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		})).
		Named("virtualmachineclass").
		Complete(r)
}

func (r *Reconciler) allClasses(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha3.VirtualMachineClassList
	if err := r.client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return out
}

// Reconcile updates one class's status; a class being deleted keeps its finalizer while VMs use it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &v1alpha3.VirtualMachineClass{}
	if err := r.client.Get(ctx, req.NamespacedName, class); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var vms v1alpha2.VirtualMachineList
	if err := r.client.List(ctx, &vms); err != nil {
		return ctrl.Result{}, fmt.Errorf("list VirtualMachines: %w", err)
	}
	users := Users(class.Name, vms.Items)
	if class.DeletionTimestamp != nil && len(users) == 0 {
		if controllerutil.RemoveFinalizer(class, Finalizer) {
			if err := r.client.Update(ctx, class); err != nil {
				return ctrl.Result{}, fmt.Errorf("remove the finalizer: %w", err)
			}
		}
		return ctrl.Result{}, nil
	}
	if class.DeletionTimestamp == nil && controllerutil.AddFinalizer(class, Finalizer) {
		if err := r.client.Update(ctx, class); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list Nodes: %w", err)
	}
	problem := ""
	available, err := AvailableNodes(class, nodes.Items)
	if err != nil {
		problem = err.Error()
	}
	old := class.Status.DeepCopy()
	st := Status(class, Names(available), problem, Discover(class, available), users, metav1.NewTime(r.clock.Now()))
	if equality.Semantic.DeepEqual(*old, st) {
		return ctrl.Result{}, nil
	}
	class.Status = st
	if err := r.client.Status().Update(ctx, class); err != nil {
		return ctrl.Result{}, fmt.Errorf("update the status: %w", err)
	}
	if old.Phase != st.Phase {
		t, note := corev1.EventTypeNormal, fmt.Sprintf("phase %s -> %s", orNone(old.Phase), st.Phase)
		if class.DeletionTimestamp != nil {
			t, note = corev1.EventTypeWarning, note+": kept while VirtualMachines use it"
		}
		r.recorder.Eventf(class, nil, t, "VirtualMachineClassPhaseChanged", "Reconcile", "%s", note)
	}
	return ctrl.Result{}, nil
}

func orNone(p v1alpha2.VirtualMachineClassPhase) v1alpha2.VirtualMachineClassPhase {
	if p == "" {
		return "none"
	}
	return p
}
