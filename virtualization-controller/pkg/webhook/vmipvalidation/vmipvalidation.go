// Package vmipvalidation is the validating webhook of VirtualMachineIPAddress: a static address
// must be in virtualMachineCIDRs and not held by another address's lease.
package vmipvalidation

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmip"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
	"github.com/d8virt/virtualization-controller/pkg/webhook/denial"
)

// Path is where the webhook server serves the handler.
const Path = "/validate-virtualmachineipaddress"

// Validator checks addresses against the range and the leases.
type Validator struct {
	leases  client.Reader
	rng     ipam.Range
	decoder admission.Decoder
}

// NewValidator reads leases through leases.
func NewValidator(leases client.Reader, rng ipam.Range, decoder admission.Decoder) *Validator {
	return &Validator{leases: leases, rng: rng, decoder: decoder}
}

// Handle implements admission.Handler. Only a creation is checked: the spec is immutable (CEL),
// and an update of the metadata of an address that waits for its lease must not be refused.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	obj := &v1alpha2.VirtualMachineIPAddress{}
	if err := v.decoder.Decode(req, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode VirtualMachineIPAddress: %w", err))
	}
	if obj.Namespace == "" {
		obj.Namespace = req.Namespace
	}
	errs, err := v.Validate(ctx, obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return denial.Invalid(v1alpha2.SchemeGroupVersion.WithKind("VirtualMachineIPAddress").GroupKind(), obj.Name, errs)
}

// Validate is the field errors of obj; err is a failure to read the leases.
func (v *Validator) Validate(ctx context.Context, obj *v1alpha2.VirtualMachineIPAddress) (field.ErrorList, error) {
	if obj.Spec.Type != v1alpha2.VirtualMachineIPAddressTypeStatic {
		return nil, nil
	}
	path := field.NewPath("spec", "staticIP")
	addr, err := v.rng.Check(obj.Spec.StaticIP)
	switch {
	case errors.Is(err, ipam.ErrOutOfRange):
		return field.ErrorList{field.Invalid(path, obj.Spec.StaticIP, vmip.OutOfRangeMessage(obj.Spec.StaticIP))}, nil
	case err != nil:
		return field.ErrorList{field.Invalid(path, obj.Spec.StaticIP, err.Error())}, nil
	}
	lease := &v1alpha2.VirtualMachineIPAddressLease{}
	err = v.leases.Get(ctx, types.NamespacedName{Name: ipam.LeaseName(addr)}, lease)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s: %w", ipam.LeaseName(addr), err)
	}
	if lease.Spec.VirtualMachineIPAddressRef == nil || vmip.HeldBy(lease, obj) {
		return nil, nil
	}
	return field.ErrorList{field.Invalid(path, obj.Spec.StaticIP,
		"the VirtualMachineIPAddress cannot be created: "+vmip.AllocatedMessage(obj.Spec.StaticIP))}, nil
}
