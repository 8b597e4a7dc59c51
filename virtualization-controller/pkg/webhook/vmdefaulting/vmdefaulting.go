// Package vmdefaulting is the mutating (defaulting) webhook of VirtualMachine: it fills what the
// schema's defaults cannot know, from the cluster's VirtualMachineClasses. A VM that names no
// class gets the default class (the one annotated
// virtualmachineclass.virtualization.deckhouse.io/is-default-class=true), and one that sets no
// coreFraction gets its class's default for its cores, as the reference module defaults them.
// The VM controller reads the spec as written and defaults nothing itself. A new VM also gets the
// controller's cleanup finalizer here, so that the controller need not write it (one API write
// less per VM; it still adds one that is missing).
package vmdefaulting

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/virtualization-controller/pkg/controller/vm"
)

// Path is where the webhook server serves the handler.
const Path = "/mutate-virtualmachine"

// Defaulter reads the classes a machine is defaulted from.
type Defaulter struct {
	reader  client.Reader
	decoder admission.Decoder
}

// NewDefaulter reads VirtualMachineClasses through reader: past any cache, so that a class
// created just before the machine (one kubectl apply) is seen.
func NewDefaulter(reader client.Reader, decoder admission.Decoder) *Defaulter {
	return &Defaulter{reader: reader, decoder: decoder}
}

// Handle implements admission.Handler: an "add" JSON patch operation for each field Default
// filled, and nothing else (the object as sent is not re-encoded, so no field the webhook did not
// fill is touched).
func (d *Defaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	machine := &v1alpha2.VirtualMachine{}
	if err := d.decoder.Decode(req, machine); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode VirtualMachine: %w", err))
	}
	var classes v1alpha3.VirtualMachineClassList
	if err := d.reader.List(ctx, &classes); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list VirtualMachineClasses: %w", err))
	}
	before := machine.Spec
	Default(machine, classes.Items)
	var ops []jsonpatch.Operation
	for _, f := range []struct {
		path    string
		was, is string
	}{
		{"/spec/runPolicy", string(before.RunPolicy), string(machine.Spec.RunPolicy)},
		{"/spec/virtualMachineClassName", before.VirtualMachineClassName, machine.Spec.VirtualMachineClassName},
		{"/spec/cpu/coreFraction", before.CPU.CoreFraction, machine.Spec.CPU.CoreFraction},
	} {
		if f.was != f.is {
			ops = append(ops, jsonpatch.NewOperation("add", f.path, f.is))
		}
	}
	if req.Operation == admissionv1.Create && !slices.Contains(machine.Finalizers, vm.Finalizer) {
		if len(machine.Finalizers) == 0 {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/finalizers", []string{vm.Finalizer}))
		} else {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/finalizers/-", vm.Finalizer))
		}
	}
	return admission.Patched("", ops...)
}

// Default fills the machine's spec from classes: the default class when it names none (left
// empty when there is no single default: the controller says so in the ClassReady condition),
// the class's default core fraction for its cores when it sets none (100% when the class has
// none; left empty while the class does not exist), and the run policy.
func Default(machine *v1alpha2.VirtualMachine, classes []v1alpha3.VirtualMachineClass) {
	s := &machine.Spec
	if s.RunPolicy == "" {
		s.RunPolicy = v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy
	}
	if s.VirtualMachineClassName == "" {
		s.VirtualMachineClassName = defaultClass(classes)
	}
	if s.CPU.CoreFraction == "" {
		for i := range classes {
			if classes[i].Name == s.VirtualMachineClassName {
				s.CPU.CoreFraction = vm.EffectiveCoreFraction(machine, &classes[i])
			}
		}
	}
}

// defaultClass is the name of the one class annotated as the default (and not being deleted);
// empty when there is none or more than one.
func defaultClass(classes []v1alpha3.VirtualMachineClass) string {
	name := ""
	for i := range classes {
		if classes[i].Annotations[v1alpha2.AnnotationDefaultClass] != "true" || classes[i].DeletionTimestamp != nil {
			continue
		}
		if name != "" {
			return ""
		}
		name = classes[i].Name
	}
	return name
}
