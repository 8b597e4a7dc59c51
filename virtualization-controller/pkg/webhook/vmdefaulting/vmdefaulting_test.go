package vmdefaulting

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

func class(name string, isDefault bool, defaultFraction string) v1alpha3.VirtualMachineClass {
	c := v1alpha3.VirtualMachineClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if isDefault {
		c.Annotations = map[string]string{v1alpha2.AnnotationDefaultClass: "true"}
	}
	p := v1alpha3.SizingPolicy{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4}}}
	if defaultFraction != "" {
		f := v1alpha3.CoreFractionValue(defaultFraction)
		p.DefaultCoreFraction = &f
	}
	c.Spec.SizingPolicies = []v1alpha3.SizingPolicy{p}
	return c
}

func TestDefault(t *testing.T) {
	generic, small, other := class("generic", true, ""), class("small", false, "20%"), class("other", true, "")
	deleted := class("deleted", true, "")
	deleted.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name                string
		spec                v1alpha2.VirtualMachineSpec
		classes             []v1alpha3.VirtualMachineClass
		wantClass, wantFrac string
		wantPolicy          v1alpha2.RunPolicy
	}{
		{name: "the default class and its fraction", spec: v1alpha2.VirtualMachineSpec{CPU: v1alpha2.CPUSpec{Cores: 2}},
			classes: []v1alpha3.VirtualMachineClass{generic, small}, wantClass: "generic", wantFrac: "100%", wantPolicy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		{name: "a named class's default fraction", spec: v1alpha2.VirtualMachineSpec{VirtualMachineClassName: "small", CPU: v1alpha2.CPUSpec{Cores: 2}, RunPolicy: v1alpha2.ManualPolicy},
			classes: []v1alpha3.VirtualMachineClass{generic, small}, wantClass: "small", wantFrac: "20%", wantPolicy: v1alpha2.ManualPolicy},
		{name: "cores outside every policy: 100%", spec: v1alpha2.VirtualMachineSpec{VirtualMachineClassName: "small", CPU: v1alpha2.CPUSpec{Cores: 8}},
			classes: []v1alpha3.VirtualMachineClass{small}, wantClass: "small", wantFrac: "100%", wantPolicy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		{name: "what the user set is kept", spec: v1alpha2.VirtualMachineSpec{VirtualMachineClassName: "small", CPU: v1alpha2.CPUSpec{Cores: 2, CoreFraction: "50%"}, RunPolicy: v1alpha2.AlwaysOffPolicy},
			classes: []v1alpha3.VirtualMachineClass{generic, small}, wantClass: "small", wantFrac: "50%", wantPolicy: v1alpha2.AlwaysOffPolicy},
		{name: "no default class", spec: v1alpha2.VirtualMachineSpec{CPU: v1alpha2.CPUSpec{Cores: 1}},
			classes: []v1alpha3.VirtualMachineClass{small}, wantPolicy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		{name: "two defaults: none", spec: v1alpha2.VirtualMachineSpec{CPU: v1alpha2.CPUSpec{Cores: 1}},
			classes: []v1alpha3.VirtualMachineClass{generic, other}, wantPolicy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		{name: "a default being deleted does not count", spec: v1alpha2.VirtualMachineSpec{CPU: v1alpha2.CPUSpec{Cores: 1}},
			classes: []v1alpha3.VirtualMachineClass{generic, deleted}, wantClass: "generic", wantFrac: "100%", wantPolicy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
		{name: "a class not there yet: no fraction", spec: v1alpha2.VirtualMachineSpec{VirtualMachineClassName: "later", CPU: v1alpha2.CPUSpec{Cores: 1}},
			classes: []v1alpha3.VirtualMachineClass{generic}, wantClass: "later", wantPolicy: v1alpha2.AlwaysOnUnlessStoppedManuallyPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &v1alpha2.VirtualMachine{Spec: tc.spec}
			Default(vm, tc.classes)
			if s := vm.Spec; s.VirtualMachineClassName != tc.wantClass || s.CPU.CoreFraction != tc.wantFrac || s.RunPolicy != tc.wantPolicy {
				t.Errorf("class %q fraction %q policy %q, want %q %q %q", s.VirtualMachineClassName, s.CPU.CoreFraction, s.RunPolicy, tc.wantClass, tc.wantFrac, tc.wantPolicy)
			}
		})
	}
}

func TestHandle(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha2.AddToScheme, v1alpha3.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	generic := class("generic", true, "10%")
	d := NewDefaulter(fake.NewClientBuilder().WithScheme(scheme).WithObjects(&generic).Build(), admission.NewDecoder(scheme))
	vm := v1alpha2.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
		Spec:       v1alpha2.VirtualMachineSpec{RunPolicy: v1alpha2.AlwaysOnPolicy, CPU: v1alpha2.CPUSpec{Cores: 1}},
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns", Name: "vm"}}
	req.Object.Raw, _ = json.Marshal(vm)
	resp := d.Handle(context.Background(), req)
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	got := map[string]any{}
	for _, p := range resp.Patches {
		got[p.Path] = p.Value
	}
	if len(got) != 3 || got["/spec/virtualMachineClassName"] != "generic" || got["/spec/cpu/coreFraction"] != "10%" ||
		fmt.Sprint(got["/metadata/finalizers"]) != "[virtualization.deckhouse.io/vm-cleanup]" {
		t.Errorf("patches %+v", resp.Patches)
	}

	// Another finalizer is kept; an update gets no finalizer.
	vm.Finalizers = []string{"example.com/keep"}
	req.Object.Raw, _ = json.Marshal(vm)
	if resp := d.Handle(context.Background(), req); len(resp.Patches) != 3 || resp.Patches[2].Path != "/metadata/finalizers/-" {
		t.Errorf("with a finalizer: %+v", resp.Patches)
	}
	vm.Finalizers = nil
	req.Operation = admissionv1.Update
	req.Object.Raw, _ = json.Marshal(vm)
	if resp := d.Handle(context.Background(), req); len(resp.Patches) != 2 {
		t.Errorf("update: %+v", resp.Patches)
	}

	req.Object.Raw = []byte("{")
	if resp := d.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != 400 {
		t.Errorf("a broken object: %+v", resp)
	}
}
