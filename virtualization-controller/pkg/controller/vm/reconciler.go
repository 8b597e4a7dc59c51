// Package vm is the VirtualMachine controller: it builds one internal KubeVirt VM per friendly
// VirtualMachine (same name and namespace, owned by it), enforces the run policy through the
// internal VM's state change requests, and reports the status.
//
// The decisions are pure (builder.go, devices.go, runpolicy.go, changes.go, status.go,
// events.go); the reconciler reads the objects and carries the decisions out.
package vm

import (
	"context"
	"fmt"
	"sync"

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
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/virtualization-controller/pkg/kubeget"
)

// EventSource is the controller's name in the events it records.
const EventSource = "virtualmachine-controller"

// Finalizer keeps a VM until its internal VM and VMI are gone.
const Finalizer = "virtualization.deckhouse.io/vm-cleanup"

// Reconciler keeps the internal VM in line with a friendly VM. Level-based: each reconcile reads
// everything afresh.
type Reconciler struct {
	client client.Client
	// apiReader reads Secrets past the cache: the controller does not watch Secrets.
	apiReader client.Reader
	clock     clock.PassiveClock
	recorder  events.EventRecorder
	written   *writtenStatuses
}

// NewReconciler wires a Reconciler.
func NewReconciler(c client.Client, apiReader client.Reader, clk clock.PassiveClock, recorder events.EventRecorder) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, clock: clk, recorder: recorder, written: &writtenStatuses{m: map[types.UID]v1alpha2.VirtualMachineStatus{}}}
}

// writtenStatuses are the statuses the controller last wrote, by VM. The controller is the one
// writer of a VM's status, so the last one it wrote is the apiserver's, even while the cache has
// not seen it yet: a status is computed from it and written as a patch of it, without a
// resourceVersion that a stale cache would make conflict (a start reconciles a VM many times in
// a few seconds, each VMI phase and the address bringing one).
type writtenStatuses struct {
	mu sync.Mutex
	m  map[types.UID]v1alpha2.VirtualMachineStatus
}

func (w *writtenStatuses) get(uid types.UID) (v1alpha2.VirtualMachineStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.m[uid]
	return s, ok
}

func (w *writtenStatuses) set(uid types.UID, s v1alpha2.VirtualMachineStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[uid] = s
}

func (w *writtenStatuses) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, uid)
}

// SetupWithManager watches VMs, the internal VMs they own, the internal VMIs (same name), and
// the objects VMs depend on; workers VMs are reconciled at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha2.VirtualMachine{}).
		Owns(&kubevirtv1.VirtualMachine{}).
		Watches(&kubevirtv1.VirtualMachineInstance{}, sameName).
		Watches(&v1alpha2.VirtualDisk{}, r.usersOf(KindVirtualDisk)).
		Watches(&v1alpha2.VirtualImage{}, r.usersOf(KindVirtualImage)).
		Watches(&v1alpha2.ClusterVirtualImage{}, r.usersOf(KindClusterVirtualImage)).
		Watches(&v1alpha3.VirtualMachineClass{}, r.usersOf("")).
		Watches(&v1alpha2.VirtualMachineIPAddress{}, r.usersOf("VirtualMachineIPAddress")).
		Watches(&v1alpha2.VirtualMachineBlockDeviceAttachment{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			a := o.(*v1alpha2.VirtualMachineBlockDeviceAttachment)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.VirtualMachineName}}}
		})).
		Named("virtualmachine").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// usersOf maps an object to the VMs that use it: a block device of kind, a class (kind empty),
// or a VirtualMachineIPAddress.
func (r *Reconciler) usersOf(kind v1alpha2.BlockDeviceKind) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var vms v1alpha2.VirtualMachineList
		if err := r.client.List(ctx, &vms, client.InNamespace(o.GetNamespace())); err != nil {
			log.FromContext(ctx).Error(err, "list VirtualMachines for a dependency", "kind", kind, "name", o.GetName())
			return nil
		}
		var out []reconcile.Request
		for i := range vms.Items {
			if uses(&vms.Items[i], kind, o) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vms.Items[i])})
			}
		}
		return out
	})
}

func uses(vm *v1alpha2.VirtualMachine, kind v1alpha2.BlockDeviceKind, o client.Object) bool {
	switch kind {
	case "":
		return vm.Spec.VirtualMachineClassName == o.GetName()
	case "VirtualMachineIPAddress":
		// Only the VM whose address it is: every address of a namespace changes a few times
		// while its VM starts, and ten VMs starting at once each reconciled every other's.
		return IPAddressName(vm) == o.GetName()
	}
	for _, ref := range vm.Spec.BlockDeviceRefs {
		if ref.Kind == kind && ref.Name == o.GetName() {
			return true
		}
	}
	return false
}

// Reconcile brings one VM a step closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &v1alpha2.VirtualMachine{}
	if err := r.client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	internal, err := kubeget.Optional(ctx, r.client, req.NamespacedName, &kubevirtv1.VirtualMachine{})
	if err != nil {
		return ctrl.Result{}, err
	}
	vmi, err := kubeget.Optional(ctx, r.client, req.NamespacedName, &kubevirtv1.VirtualMachineInstance{})
	if err != nil {
		return ctrl.Result{}, err
	}
	if internal != nil && !metav1.IsControlledBy(internal, vm) {
		// A kubevirt.io VM of that name that this VM does not own (made directly, or by an older
		// VM of the name): never taken over.
		r.event(vm, Event{Type: corev1.EventTypeWarning, Reason: string(vmcondition.ReasonInternalVirtualMachineError),
			Note: fmt.Sprintf("an internal VM %s exists that this VirtualMachine does not own", internal.Name)})
		return ctrl.Result{}, nil
	}
	if vm.DeletionTimestamp != nil {
		return ctrl.Result{}, r.cleanup(ctx, vm, internal, vmi)
	}
	if !controllerutil.ContainsFinalizer(vm, Finalizer) {
		controllerutil.AddFinalizer(vm, Finalizer)
		if err := r.client.Update(ctx, vm); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
	}
	in, err := r.inputs(ctx, vm, internal, vmi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.DependenciesReady() {
		if in.Internal, err = r.applyInternal(ctx, in); err != nil {
			// The core's webhooks may deny the internal VM: the user sees why.
			r.event(vm, Event{Type: corev1.EventTypeWarning, Reason: string(vmcondition.ReasonInternalVirtualMachineError), Note: err.Error()})
			return ctrl.Result{}, err
		}
	}
	if in.Internal != nil {
		if err := r.power(ctx, in); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.writeStatus(ctx, in)
}

// inputs reads what the VM depends on: its class, block devices, cloud-init Secret and IP
// address.
func (r *Reconciler) inputs(ctx context.Context, vm *v1alpha2.VirtualMachine, internal *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (*StatusInputs, error) {
	in := &StatusInputs{VM: vm, Internal: internal, VMI: vmi, Now: metav1.NewTime(r.clock.Now())}
	if err := r.readClass(ctx, in); err != nil {
		return nil, err
	}
	for _, ref := range vm.Spec.BlockDeviceRefs {
		d, err := r.device(ctx, vm.Namespace, ref)
		if err != nil {
			return nil, err
		}
		in.Devices = append(in.Devices, d)
	}
	var attachments v1alpha2.VirtualMachineBlockDeviceAttachmentList
	if err := r.client.List(ctx, &attachments, client.InNamespace(vm.Namespace)); err != nil {
		return nil, fmt.Errorf("list VirtualMachineBlockDeviceAttachments: %w", err)
	}
	for _, a := range attachments.Items {
		if a.Spec.VirtualMachineName == vm.Name {
			in.Attachments = append(in.Attachments, a)
		}
	}
	problem, err := r.provisioningProblem(ctx, vm)
	if err != nil {
		return nil, err
	}
	in.ProvisioningProblem = problem
	if in.IPAddress, err = r.ipAddress(ctx, vm); err != nil {
		return nil, err
	}
	if vmi != nil && vmi.DeletionTimestamp == nil {
		if applied, ok := vmi.Annotations[AnnotationAppliedSpec]; ok {
			if in.Changes, err = RestartAwaitingChanges(applied, &vm.Spec); err != nil {
				return nil, err
			}
		}
		if in.ClassChanged, err = ClassChanged(vmi.Annotations[AnnotationAppliedClass], in.Class); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func (r *Reconciler) readClass(ctx context.Context, in *StatusInputs) error {
	name := in.VM.Spec.VirtualMachineClassName
	if name == "" {
		// The defaulting webhook fills it from the default class; empty means there was no
		// single default when the VM was written.
		in.ClassProblem = "spec.virtualMachineClassName is empty and no single VirtualMachineClass was annotated " +
			v1alpha2.AnnotationDefaultClass + "=true when the VirtualMachine was written: name a class"
		return nil
	}
	class, err := kubeget.Optional(ctx, r.client, types.NamespacedName{Name: name}, &v1alpha3.VirtualMachineClass{})
	if err != nil {
		return err
	}
	if in.ClassProblem = ClassProblem(name, class); in.ClassProblem == "" {
		in.Class = class
	}
	return nil
}

func (r *Reconciler) device(ctx context.Context, ns string, ref v1alpha2.BlockDeviceSpecRef) (Device, error) {
	key := types.NamespacedName{Namespace: ns, Name: ref.Name}
	switch ref.Kind {
	case KindVirtualDisk:
		vd, err := kubeget.Optional(ctx, r.client, key, &v1alpha2.VirtualDisk{})
		return DiskDevice(ref, vd), err
	case KindVirtualImage:
		vi, err := kubeget.Optional(ctx, r.client, key, &v1alpha2.VirtualImage{})
		return VirtualImageDevice(ref, vi), err
	case KindClusterVirtualImage:
		cvi, err := kubeget.Optional(ctx, r.client, types.NamespacedName{Name: ref.Name}, &v1alpha2.ClusterVirtualImage{})
		return ClusterVirtualImageDevice(ref, cvi), err
	}
	return Device{Ref: ref, Reason: fmt.Sprintf("spec.blockDeviceRefs kind %q is not supported", ref.Kind)}, nil
}

// provisioningProblem checks the Secret a UserDataRef names: it exists, has the cloud-init type
// and a userData key.
func (r *Reconciler) provisioningProblem(ctx context.Context, vm *v1alpha2.VirtualMachine) (string, error) {
	p := vm.Spec.Provisioning
	if p == nil || p.Type != v1alpha2.ProvisioningTypeUserDataRef || p.UserDataRef == nil {
		return "", nil
	}
	s, err := kubeget.Optional(ctx, r.apiReader, types.NamespacedName{Namespace: vm.Namespace, Name: p.UserDataRef.Name}, &corev1.Secret{})
	if err != nil {
		return "", err
	}
	return SecretProblem(p.UserDataRef.Name, s), nil
}

// SecretProblem says why a cloud-init Secret (nil: not found) cannot be used; empty when it can.
func SecretProblem(name string, s *corev1.Secret) string {
	switch {
	case s == nil:
		return fmt.Sprintf("spec.provisioning.userDataRef: Secret %s not found", name)
	case s.Type != v1alpha2.SecretTypeCloudInit:
		return fmt.Sprintf("spec.provisioning.userDataRef: Secret %s has type %q, want %q", name, s.Type, v1alpha2.SecretTypeCloudInit)
	case len(s.Data["userData"]) == 0:
		return fmt.Sprintf("spec.provisioning.userDataRef: Secret %s has no key userData", name)
	}
	return ""
}

// ipAddress is the VM's VirtualMachineIPAddress: the one its spec names, else the one IPAM
// creates for it, named after the VM; nil while there is none.
func (r *Reconciler) ipAddress(ctx context.Context, vm *v1alpha2.VirtualMachine) (*v1alpha2.VirtualMachineIPAddress, error) {
	return kubeget.Optional(ctx, r.client, types.NamespacedName{Namespace: vm.Namespace, Name: IPAddressName(vm)}, &v1alpha2.VirtualMachineIPAddress{})
}

// IPAddressName is the name of the VM's VirtualMachineIPAddress: spec.virtualMachineIPAddressName,
// else the VM's own name (as IPAM names the one it creates, after the reference module).
func IPAddressName(vm *v1alpha2.VirtualMachine) string {
	if vm.Spec.VirtualMachineIPAddressName != "" {
		return vm.Spec.VirtualMachineIPAddressName
	}
	return vm.Name
}

// applyInternal creates the internal VM, or updates its spec to the one built now.
func (r *Reconciler) applyInternal(ctx context.Context, in *StatusInputs) (*kubevirtv1.VirtualMachine, error) {
	ip := ""
	if in.IPAddress != nil {
		ip = in.IPAddress.Status.Address
	}
	desired, err := Build(Inputs{VM: in.VM, Class: in.Class, Devices: in.Devices, IPAddress: ip})
	if err != nil {
		return nil, err
	}
	cur := in.Internal
	if cur == nil {
		if err := r.client.Create(ctx, desired); err != nil {
			return nil, fmt.Errorf("create the internal VM: %w", err)
		}
		r.event(in.VM, Event{Type: corev1.EventTypeNormal, Reason: "InternalVirtualMachineCreated", Note: "created the internal VM"})
		return desired, nil
	}
	hash := desired.Annotations[AnnotationSpecHash]
	if cur.Annotations[AnnotationSpecHash] == hash && equality.Semantic.DeepEqual(cur.Labels, desired.Labels) {
		return cur, nil
	}
	cur = cur.DeepCopy()
	cur.Spec, cur.Labels = desired.Spec, desired.Labels
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[AnnotationSpecHash] = hash
	if err := r.client.Update(ctx, cur); err != nil {
		return nil, fmt.Errorf("update the internal VM: %w", err)
	}
	return cur, nil
}

// power carries DecidePower out: the state change requests on the internal VM's status.
func (r *Reconciler) power(ctx context.Context, in *StatusInputs) error {
	internal := in.Internal
	automatic := in.VM.Spec.Disruptions != nil && in.VM.Spec.Disruptions.RestartApprovalMode == v1alpha2.Automatic
	p := DecidePower(PowerInputs{
		Policy: in.VM.Spec.RunPolicy, StartPending: StartPending(in.VM),
		RequestsPending: len(internal.Status.StateChangeRequests) > 0, VMI: in.VMI,
		RestartForChanges: automatic && in.AwaitsRestart(),
	})
	if p == PowerNone {
		return nil
	}
	log.FromContext(ctx).Info("power", "action", p.String(), "runPolicy", in.VM.Spec.RunPolicy)
	internal = internal.DeepCopy()
	internal.Status.StateChangeRequests = StateChangeRequests(p, in.VMI)
	if err := r.client.Status().Update(ctx, internal); err != nil {
		return fmt.Errorf("ask the core to %s the VM: %w", p, err)
	}
	r.event(in.VM, Event{Type: corev1.EventTypeNormal, Reason: "VirtualMachine" + p.String(), Note: fmt.Sprintf("%s the guest (runPolicy %s)", p, in.VM.Spec.RunPolicy)})
	in.Internal = internal
	return nil
}

func (r *Reconciler) writeStatus(ctx context.Context, in *StatusInputs) error {
	if last, ok := r.written.get(in.VM.UID); ok {
		in.VM.Status = *last.DeepCopy()
	}
	old := in.VM.Status.DeepCopy()
	st := Status(in)
	if equality.Semantic.DeepEqual(*old, st) {
		return nil
	}
	patch := client.MergeFrom(in.VM.DeepCopy())
	in.VM.Status = st
	if err := r.client.Status().Patch(ctx, in.VM, patch); err != nil {
		// Not known to be written: the next status is computed from the cache's again.
		r.written.forget(in.VM.UID)
		return fmt.Errorf("update the status: %w", err)
	}
	r.written.set(in.VM.UID, *st.DeepCopy())
	for _, e := range Transitions(old, &st) {
		r.event(in.VM, e)
	}
	return nil
}

// cleanup deletes the internal VM (the core removes its VMI first) and lets the VM go once both
// are gone.
func (r *Reconciler) cleanup(ctx context.Context, vm *v1alpha2.VirtualMachine, internal *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	if !controllerutil.ContainsFinalizer(vm, Finalizer) {
		return nil
	}
	if vm.Status.Phase != v1alpha2.MachineTerminating {
		in := &StatusInputs{VM: vm, Internal: internal, VMI: vmi, Now: metav1.NewTime(r.clock.Now())}
		if err := r.writeStatus(ctx, in); err != nil {
			return err
		}
	}
	if internal != nil {
		if internal.DeletionTimestamp == nil {
			if err := r.client.Delete(ctx, internal); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete the internal VM: %w", err)
			}
		}
		return nil // the internal VM's deletion requeues
	}
	if vmi != nil {
		if vmi.DeletionTimestamp == nil {
			if err := r.client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete the internal VMI: %w", err)
			}
		}
		return nil
	}
	controllerutil.RemoveFinalizer(vm, Finalizer)
	if err := r.client.Update(ctx, vm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the finalizer: %w", err)
	}
	r.written.forget(vm.UID)
	return nil
}

func (r *Reconciler) event(vm *v1alpha2.VirtualMachine, e Event) {
	r.recorder.Eventf(vm, nil, e.Type, e.Reason, "Reconcile", "%s", e.Note)
}
