// Package vmbda is the VirtualMachineBlockDeviceAttachment controller: it hot-plugs the
// attachment's VirtualDisk or image into its running VirtualMachine through virtualization-api's
// addvolume (as the reference module does: the controller is virtualization-api's client, so the
// friendly VM is checked and the call is authorized as any other), and unplugs it through
// removevolume when the attachment is deleted. An image in DVCR is copied onto a claim of the
// attachment's first (copy.go).
//
// Decide (decide.go) is pure; the reconciler reads the objects and carries the decision out.
package vmbda

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmbdacondition"
	"github.com/d8virt/virtualization-controller/pkg/kubeget"
)

// EventSource is the controller's name in the events it records.
const EventSource = "vmbda-controller"

// waitInterval is how often an attachment that waits for the guest to release its disk looks
// again (the VMI's changes wake it sooner).
const waitInterval = 5 * time.Second

// copyProgressInterval is how often a running copy's progress is read into the status.
const copyProgressInterval = 3 * time.Second

// Hotplug is virtualization-api's addvolume and removevolume (subresources.Client).
type Hotplug interface {
	AddVolume(ctx context.Context, namespace, name string, opts *kubevirtv1.AddVolumeOptions) error
	RemoveVolume(ctx context.Context, namespace, name string, opts *kubevirtv1.RemoveVolumeOptions) error
}

// Reconciler carries out Decide. Level-based: each reconcile reads everything afresh.
type Reconciler struct {
	client   client.Client
	hotplug  Hotplug
	copier   Copier
	clock    clock.PassiveClock
	recorder events.EventRecorder
}

// NewReconciler wires a Reconciler.
func NewReconciler(c client.Client, hotplug Hotplug, copier Copier, clk clock.PassiveClock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, hotplug: hotplug, copier: copier, clock: clk, recorder: recorder}
}

// SetupWithManager watches attachments, their copies' claims and fillers, and the VMs, VMIs,
// disks and images they name.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha2.VirtualMachineBlockDeviceAttachment{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Watches(&v1alpha2.ClusterVirtualImage{}, r.naming(byRef(v1alpha2.VMBDAObjectRefKindClusterVirtualImage))).
		Watches(&v1alpha2.VirtualMachine{}, r.naming(byMachine)).
		Watches(&kubevirtv1.VirtualMachineInstance{}, r.naming(byMachine)).
		Watches(&v1alpha2.VirtualDisk{}, r.naming(byRef(v1alpha2.VMBDAObjectRefKindVirtualDisk))).
		Watches(&v1alpha2.VirtualImage{}, r.naming(byRef(v1alpha2.VMBDAObjectRefKindVirtualImage))).
		Named("virtualmachineblockdeviceattachment").
		Complete(r)
}

func byMachine(a *v1alpha2.VirtualMachineBlockDeviceAttachment, o client.Object) bool {
	return a.Spec.VirtualMachineName == o.GetName()
}

// byRef matches the attachments of a device of kind.
func byRef(kind v1alpha2.VMBDAObjectRefKind) func(*v1alpha2.VirtualMachineBlockDeviceAttachment, client.Object) bool {
	return func(a *v1alpha2.VirtualMachineBlockDeviceAttachment, o client.Object) bool {
		return a.Spec.BlockDeviceRef.Kind == kind && a.Spec.BlockDeviceRef.Name == o.GetName()
	}
}

// naming maps an object to the attachments of its namespace that name it.
func (r *Reconciler) naming(match func(*v1alpha2.VirtualMachineBlockDeviceAttachment, client.Object) bool) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list v1alpha2.VirtualMachineBlockDeviceAttachmentList
		if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			log.FromContext(ctx).Error(err, "list VirtualMachineBlockDeviceAttachments", "object", o.GetName())
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			if match(&list.Items[i], o) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	})
}

// Reconcile does the next step for one attachment.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &v1alpha2.VirtualMachineBlockDeviceAttachment{}
	if err := r.client.Get(ctx, req.NamespacedName, a); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	in, err := r.inputs(ctx, a)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(in)
	log.FromContext(ctx).V(1).Info("reconcile", "action", d.Action.String(), "phase", d.Status.Phase)
	switch d.Action {
	case ActionAddFinalizer:
		patch := client.MergeFrom(a.DeepCopy())
		controllerutil.AddFinalizer(a, Finalizer)
		if err := r.client.Patch(ctx, a, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
		return ctrl.Result{}, nil
	case ActionRemoveFinalizer:
		// The copy's exporter is in the module's namespace: nothing there is owned by a.
		if err := r.copier.Cleanup(ctx, a); err != nil {
			return ctrl.Result{}, err
		}
		patch := client.MergeFrom(a.DeepCopy())
		controllerutil.RemoveFinalizer(a, Finalizer)
		if err := r.client.Patch(ctx, a, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("remove the finalizer: %w", err)
		}
		return ctrl.Result{}, nil
	case ActionAttach:
		if a.Spec.BlockDeviceRef.Kind != v1alpha2.VMBDAObjectRefKindVirtualDisk {
			// A copy's filler and exporter go with its end; a cleanup that failed then is done now.
			if left, err := r.copier.Leftover(ctx, a); err != nil || left {
				if err == nil {
					err = r.copier.Cleanup(ctx, a)
				}
				if err != nil {
					return ctrl.Result{}, err
				}
			}
		}
		if err := r.hotplug.AddVolume(ctx, a.Namespace, a.Spec.VirtualMachineName, d.Add); err != nil {
			r.recorder.Eventf(a, nil, corev1.EventTypeWarning, "FailedAttach", "Attach", "Error plugging %s %s into VirtualMachine %s: %v",
				a.Spec.BlockDeviceRef.Kind, a.Spec.BlockDeviceRef.Name, a.Spec.VirtualMachineName, err)
			return ctrl.Result{}, fmt.Errorf("attach: %w", err)
		}
		log.FromContext(ctx).Info("addvolume sent", "virtualMachine", a.Spec.VirtualMachineName, "volume", d.Volume)
	case ActionDetach:
		err := r.hotplug.RemoveVolume(ctx, a.Namespace, a.Spec.VirtualMachineName, &kubevirtv1.RemoveVolumeOptions{Name: d.Volume})
		// A volume the VMI no longer has (the cache lagged) is unplugged already.
		if err != nil && !apierrors.IsNotFound(err) {
			r.recorder.Eventf(a, nil, corev1.EventTypeWarning, "FailedDetach", "Detach", "Error unplugging %s %s from VirtualMachine %s: %v",
				a.Spec.BlockDeviceRef.Kind, a.Spec.BlockDeviceRef.Name, a.Spec.VirtualMachineName, err)
			return ctrl.Result{}, fmt.Errorf("detach: %w", err)
		}
		log.FromContext(ctx).Info("removevolume sent", "virtualMachine", a.Spec.VirtualMachineName, "volume", d.Volume)
	case ActionCopy:
		wait, err := r.copier.Step(ctx, a, *d.Copy)
		if err != nil {
			r.recorder.Eventf(a, nil, corev1.EventTypeWarning, "FailedCopy", "Copy", "Error copying %s %s for the hot-plug: %v",
				a.Spec.BlockDeviceRef.Kind, a.Spec.BlockDeviceRef.Name, err)
			return ctrl.Result{}, errors.Join(err, r.setStatus(ctx, a, d.Status))
		}
		if wait {
			return ctrl.Result{RequeueAfter: time.Second}, r.setStatus(ctx, a, d.Status)
		}
		// The filler's progress is read again after a while (its Pod's events wake it sooner).
		return ctrl.Result{RequeueAfter: copyProgressInterval}, r.setStatus(ctx, a, d.Status)
	}
	if err := r.setStatus(ctx, a, d.Status); err != nil {
		return ctrl.Result{}, err
	}
	if a.DeletionTimestamp != nil {
		return ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	return ctrl.Result{}, nil
}

// inputs reads the attachment's VM, VMI and disk, and what else claims the disk.
func (r *Reconciler) inputs(ctx context.Context, a *v1alpha2.VirtualMachineBlockDeviceAttachment) (Inputs, error) {
	in := Inputs{VMBDA: a, Now: metav1.NewTime(r.clock.Now())}
	key := types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.VirtualMachineName}
	var err error
	if in.VM, err = kubeget.Optional(ctx, r.client, key, &v1alpha2.VirtualMachine{}); err != nil {
		return in, err
	}
	if in.VMI, err = kubeget.Optional(ctx, r.client, key, &kubevirtv1.VirtualMachineInstance{}); err != nil {
		return in, err
	}
	ref := a.Spec.BlockDeviceRef
	refKey := types.NamespacedName{Namespace: a.Namespace, Name: ref.Name}
	switch ref.Kind {
	case v1alpha2.VMBDAObjectRefKindVirtualDisk:
		in.Disk, err = kubeget.Optional(ctx, r.client, refKey, &v1alpha2.VirtualDisk{})
	case v1alpha2.VMBDAObjectRefKindVirtualImage:
		in.Image, err = kubeget.Optional(ctx, r.client, refKey, &v1alpha2.VirtualImage{})
	case v1alpha2.VMBDAObjectRefKindClusterVirtualImage:
		in.ClusterImage, err = kubeget.Optional(ctx, r.client, types.NamespacedName{Name: ref.Name}, &v1alpha2.ClusterVirtualImage{})
	}
	if err != nil {
		return in, err
	}
	if ref.Kind != v1alpha2.VMBDAObjectRefKindVirtualDisk {
		if in.Copy, err = r.copier.State(ctx, a); err != nil {
			return in, err
		}
	}
	var vms v1alpha2.VirtualMachineList
	if err := r.client.List(ctx, &vms, client.InNamespace(a.Namespace)); err != nil {
		return in, fmt.Errorf("list VirtualMachines: %w", err)
	}
	in.SpecUsers = SpecUsers(vms.Items, ref)
	var others v1alpha2.VirtualMachineBlockDeviceAttachmentList
	if err := r.client.List(ctx, &others, client.InNamespace(a.Namespace)); err != nil {
		return in, fmt.Errorf("list VirtualMachineBlockDeviceAttachments: %w", err)
	}
	in.Others = others.Items
	return in, nil
}

// SpecUsers are the names of the VMs whose spec.blockDeviceRefs name the device.
func SpecUsers(vms []v1alpha2.VirtualMachine, ref v1alpha2.VMBDAObjectRef) []string {
	var out []string
	for i := range vms {
		for _, r := range vms[i].Spec.BlockDeviceRefs {
			if string(r.Kind) == string(ref.Kind) && r.Name == ref.Name {
				out = append(out, vms[i].Name)
				break
			}
		}
	}
	return out
}

// setStatus writes the status when it differs, with an Event when the phase changes (a Warning
// for Failed and Pending, which say what is wrong).
func (r *Reconciler) setStatus(ctx context.Context, a *v1alpha2.VirtualMachineBlockDeviceAttachment, s v1alpha2.VirtualMachineBlockDeviceAttachmentStatus) error {
	if equality.Semantic.DeepEqual(a.Status, s) {
		return nil
	}
	old := a.Status.Phase
	patch := client.MergeFrom(a.DeepCopy())
	a.Status = s
	if err := r.client.Status().Patch(ctx, a, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if old == s.Phase {
		return nil
	}
	e := PhaseEvent(s)
	r.recorder.Eventf(a, nil, e.Type, e.Reason, "Reconcile", "%s", e.Note)
	return nil
}

// Event is one event to record.
type Event struct {
	Type, Reason, Note string
}

// PhaseEvent is the event of a change to the status's phase: its reason is the Attached
// condition's (Conflict, NotAttached, Attached, ...), its note the phase and why.
func PhaseEvent(s v1alpha2.VirtualMachineBlockDeviceAttachmentStatus) Event {
	e := Event{Type: corev1.EventTypeNormal, Reason: string(s.Phase), Note: "Phase " + string(s.Phase)}
	for _, c := range s.Conditions {
		if c.Type == string(vmbdacondition.TypeAttached) {
			e.Reason, e.Note = c.Reason, fmt.Sprintf("Phase %s: %s", s.Phase, c.Message)
		}
	}
	if s.Phase == v1alpha2.BlockDeviceAttachmentPhaseFailed || s.Phase == v1alpha2.BlockDeviceAttachmentPhasePending {
		e.Type = corev1.EventTypeWarning
	}
	return e
}
