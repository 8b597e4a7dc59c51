// Package vmvalidation is the validating webhook of VirtualMachine for what the schema cannot
// see: it fits its class's sizing policy, its block devices exist, and its
// VirtualMachineIPAddress is not another machine's.
package vmvalidation

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/virtualization-controller/pkg/controller/vm"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmip"
	"github.com/d8virt/virtualization-controller/pkg/webhook/denial"
)

// Path is where the webhook server serves the handler.
const Path = "/validate-virtualmachine"

// Validator reads the objects a machine names.
type Validator struct {
	reader  client.Reader
	decoder admission.Decoder
}

// NewValidator reads disks, images and addresses through reader.
func NewValidator(reader client.Reader, decoder admission.Decoder) *Validator {
	return &Validator{reader: reader, decoder: decoder}
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	vm := &v1alpha2.VirtualMachine{}
	if err := v.decoder.Decode(req, vm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode VirtualMachine: %w", err))
	}
	if vm.Namespace == "" {
		vm.Namespace = req.Namespace
	}
	var old *v1alpha2.VirtualMachine
	if req.Operation == admissionv1.Update {
		old = &v1alpha2.VirtualMachine{}
		if err := v.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the old VirtualMachine: %w", err))
		}
	}
	errs, err := v.Validate(ctx, vm, old)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return denial.Invalid(v1alpha2.SchemeGroupVersion.WithKind("VirtualMachine").GroupKind(), vm.Name, errs)
}

// Validate is the field errors of vm (old is nil on creation); err is a failure to read.
func (v *Validator) Validate(ctx context.Context, vm, old *v1alpha2.VirtualMachine) (field.ErrorList, error) {
	errs, err := v.blockDevices(ctx, vm, old)
	if err != nil {
		return nil, err
	}
	ipErrs, err := v.address(ctx, vm, old)
	if err != nil {
		return nil, err
	}
	sizeErrs, err := v.sizing(ctx, vm, old)
	return append(append(errs, ipErrs...), sizeErrs...), err
}

// sizing checks the sizing policy on creation and when the cores, fraction, memory or class
// change (a class changed since must not block other updates). The defaulting webhook has
// filled the class; one that does not exist (yet), or none, is the VM controller's to report.
func (v *Validator) sizing(ctx context.Context, machine, old *v1alpha2.VirtualMachine) (field.ErrorList, error) {
	if old != nil && old.Spec.CPU == machine.Spec.CPU && old.Spec.Memory.Size.Cmp(machine.Spec.Memory.Size) == 0 &&
		old.Spec.VirtualMachineClassName == machine.Spec.VirtualMachineClassName {
		return nil, nil
	}
	name := machine.Spec.VirtualMachineClassName
	if name == "" {
		return nil, nil // no default class: the VM controller reports it
	}
	class := &v1alpha3.VirtualMachineClass{}
	err := v.reader.Get(ctx, types.NamespacedName{Name: name}, class)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get VirtualMachineClass %s: %w", name, err)
	}
	return vm.SizingErrors(machine, class), nil
}

// blockDevices: every device added (all of them on creation) exists.
func (v *Validator) blockDevices(ctx context.Context, vm, old *v1alpha2.VirtualMachine) (field.ErrorList, error) {
	had := map[v1alpha2.BlockDeviceSpecRef]bool{}
	if old != nil {
		for _, r := range old.Spec.BlockDeviceRefs {
			had[v1alpha2.BlockDeviceSpecRef{Kind: r.Kind, Name: r.Name}] = true
		}
	}
	var errs field.ErrorList
	for i, r := range vm.Spec.BlockDeviceRefs {
		if had[v1alpha2.BlockDeviceSpecRef{Kind: r.Kind, Name: r.Name}] {
			continue
		}
		obj, key := deviceObject(r.Kind), types.NamespacedName{Namespace: vm.Namespace, Name: r.Name}
		if obj == nil {
			continue // the schema's enum refuses other kinds
		}
		if r.Kind == v1alpha2.ClusterVirtualImageKind {
			key.Namespace = ""
		}
		err := v.reader.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "blockDeviceRefs").Index(i).Child("name"), r.Name, notFound(r.Kind, key)))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s %s: %w", r.Kind, key, err)
		}
	}
	return errs, nil
}

func deviceObject(kind v1alpha2.BlockDeviceKind) client.Object {
	switch kind {
	case v1alpha2.VirtualDiskKind:
		return &v1alpha2.VirtualDisk{}
	case v1alpha2.VirtualImageKind:
		return &v1alpha2.VirtualImage{}
	case v1alpha2.ClusterVirtualImageKind:
		return &v1alpha2.ClusterVirtualImage{}
	}
	return nil
}

func notFound(kind v1alpha2.BlockDeviceKind, key types.NamespacedName) string {
	if key.Namespace == "" {
		return fmt.Sprintf("the %s %s does not exist", kind, key.Name)
	}
	return fmt.Sprintf("the %s %s does not exist in the namespace %s", kind, key.Name, key.Namespace)
}

// address: the machine's VirtualMachineIPAddress is not attached to another machine, and one
// named after a new machine that names none is its own (as the reference module checks).
func (v *Validator) address(ctx context.Context, vm, old *v1alpha2.VirtualMachine) (field.ErrorList, error) {
	if old != nil && old.Spec.VirtualMachineIPAddressName == vm.Spec.VirtualMachineIPAddressName {
		return nil, nil
	}
	name := vmip.AddressName(vm)
	ip := &v1alpha2.VirtualMachineIPAddress{}
	err := v.reader.Get(ctx, types.NamespacedName{Namespace: vm.Namespace, Name: name}, ip)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get VirtualMachineIPAddress %s: %w", name, err)
	}
	path := field.NewPath("spec", "virtualMachineIPAddressName")
	if vm.Spec.VirtualMachineIPAddressName == "" {
		if old == nil && !ownedBy(ip, vm) {
			return field.ErrorList{field.Invalid(path, "", fmt.Sprintf(
				"VirtualMachineIPAddress with the name of the virtual machine already exists: set spec.virtualMachineIPAddressName field to %s to use IP %s",
				ip.Name, ip.Status.Address))}, nil
		}
		return nil, nil
	}
	if user := ip.Status.VirtualMachineName; user != "" && user != vm.Name {
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf(
			"unable to bind the ip address (%s) to the virtual machine (%s): the ip address has already been linked to another one",
			ip.Name, vm.Name))}, nil
	}
	return nil, nil
}

// ownedBy says whether ip is the address created for vm (by UID, when the machine has one yet).
func ownedBy(ip *v1alpha2.VirtualMachineIPAddress, vm *v1alpha2.VirtualMachine) bool {
	for _, o := range ip.OwnerReferences {
		if o.Kind == "VirtualMachine" && o.Name == vm.Name && (vm.UID == "" || o.UID == vm.UID) {
			return true
		}
	}
	return false
}
