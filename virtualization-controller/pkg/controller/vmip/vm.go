package vmip

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// MachineReconciler creates the address of each machine that names none: an Auto address named
// after the machine and owned by it, so it goes (and its lease is released) with the machine.
type MachineReconciler struct {
	client client.Client
}

// NewMachineReconciler wires a MachineReconciler.
func NewMachineReconciler(c client.Client) *MachineReconciler { return &MachineReconciler{client: c} }

// SetupWithManager watches machines and the addresses they own.
func (r *MachineReconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).
		For(&v1alpha2.VirtualMachine{}).
		Owns(&v1alpha2.VirtualMachineIPAddress{}).
		Named("virtualmachine-ipaddress").
		Complete(r)
}

// Reconcile creates the machine's address when it has none. The address is looked up in the
// cache first: a machine's every status change brings it here, and a create that the apiserver
// refuses as AlreadyExists is a write all the same (several per start, before this look).
func (r *MachineReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	vm := &v1alpha2.VirtualMachine{}
	if err := r.client.Get(ctx, req.NamespacedName, vm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if vm.DeletionTimestamp != nil || vm.Spec.VirtualMachineIPAddressName != "" {
		return reconcile.Result{}, nil
	}
	vmip := ImplicitAddress(vm)
	err := r.client.Get(ctx, client.ObjectKeyFromObject(vmip), &v1alpha2.VirtualMachineIPAddress{})
	if err == nil {
		return reconcile.Result{}, nil
	}
	if !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("read the address of the machine: %w", err)
	}
	err = r.client.Create(ctx, vmip)
	if apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("create the address of the machine: %w", err)
	}
	log.FromContext(ctx).Info("address created for the machine", "virtualMachineIPAddress", vmip.Name)
	return reconcile.Result{}, nil
}

// ImplicitAddress is the address created for vm.
func ImplicitAddress(vm *v1alpha2.VirtualMachine) *v1alpha2.VirtualMachineIPAddress {
	return &v1alpha2.VirtualMachineIPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:            AddressName(vm),
			Namespace:       vm.Namespace,
			Labels:          map[string]string{LabelVirtualMachineName: vm.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1alpha2.SchemeGroupVersion.WithKind("VirtualMachine"))},
		},
		Spec: v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressTypeAuto},
	}
}
