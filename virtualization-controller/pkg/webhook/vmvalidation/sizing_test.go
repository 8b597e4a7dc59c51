package vmvalidation

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

func TestSizingErrors(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	def := v1alpha3.CoreFractionValue("50%")
	class := &v1alpha3.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "generic"},
		Spec: v1alpha3.VirtualMachineClassSpec{SizingPolicies: []v1alpha3.SizingPolicy{
			{
				SizingPolicyResources: v1alpha2.SizingPolicyResources{
					Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 4},
					Memory: &v1alpha2.SizingPolicyMemory{MemoryMinMax: v1alpha2.MemoryMinMax{Min: q("256Mi"), Max: q("8Gi")}, Step: q("256Mi"),
						PerCore: &v1alpha2.MemoryMinMax{Min: q("128Mi"), Max: q("3Gi")}},
				},
				CoreFractions: []v1alpha3.CoreFractionValue{"5%", "50%", "100%"}, DefaultCoreFraction: &def,
			},
			{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 6, Max: 12, Step: 2}}},
		}},
	}
	for _, tc := range []struct {
		name     string
		cores    int
		fraction string
		memory   string
		want     string
	}{
		{name: "fits", cores: 2, fraction: "5%", memory: "1Gi"},
		{name: "the class's default fraction", cores: 2, memory: "1Gi"},
		{name: "no policy for the cores", cores: 5, memory: "1Gi", want: `spec.cpu.cores: Invalid value: 5: virtual machine vm has no valid size policy in vm class generic`},
		{name: "cores off the step", cores: 7, want: `spec.cpu.cores: Invalid value: 7: requested VM cores not in available values grid, nearest valid values [6, 8]`},
		{name: "a fraction the policy does not list", cores: 2, fraction: "25%", memory: "1Gi", want: `spec.cpu.coreFraction: Unsupported value: "25%": supported values: "5%", "50%", "100%"`},
		{name: "too little memory", cores: 1, memory: "128Mi", want: `spec.memory.size: Invalid value: "128Mi": requested VM memory (128Mi) lesser than valid minimum, available range [256Mi, 8Gi]`},
		{name: "too much memory", cores: 4, memory: "9Gi", want: `spec.memory.size: Invalid value: "9Gi": requested VM memory (9Gi) greater than valid maximum, available range [256Mi, 8Gi]`},
		{name: "memory off the step", cores: 1, memory: "300Mi", want: `spec.memory.size: Invalid value: "300Mi": requested VM memory not in available values grid, nearest valid values [256Mi, 512Mi]`},
		{name: "too much memory per core", cores: 1, memory: "4Gi", want: `spec.memory.size: Invalid value: "4Gi": requested VM per core memory (4Gi) greater than valid maximum, available range [128Mi, 3Gi]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}
			vm.Spec.CPU = v1alpha2.CPUSpec{Cores: tc.cores, CoreFraction: tc.fraction}
			if tc.memory != "" {
				vm.Spec.Memory.Size = resource.MustParse(tc.memory)
			}
			errs := SizingErrors(vm, class)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("errors %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Fatalf("errors %v\nwant %q", errs, tc.want)
			}
		})
	}
	if errs := SizingErrors(&v1alpha2.VirtualMachine{}, &v1alpha3.VirtualMachineClass{}); len(errs) != 0 {
		t.Fatalf("a class without policies: %v", errs)
	}
}

func TestHandleSizing(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha2.AddToScheme, v1alpha3.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	small := &v1alpha3.VirtualMachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Annotations: map[string]string{v1alpha2.AnnotationDefaultClass: "true"}},
		Spec: v1alpha3.VirtualMachineClassSpec{SizingPolicies: []v1alpha3.SizingPolicy{
			{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 2}}},
		}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(small).Build()
	v := NewValidator(c, admission.NewDecoder(scheme))
	for _, tc := range []struct {
		class   string
		cores   int
		allowed bool
	}{
		{class: "small", cores: 2, allowed: true},
		{class: "small", cores: 4},
		{class: "", cores: 4}, // the default class
		{class: "missing", cores: 4, allowed: true},
	} {
		vm := v1alpha2.VirtualMachine{
			TypeMeta:   metav1.TypeMeta{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachine"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
			Spec:       v1alpha2.VirtualMachineSpec{VirtualMachineClassName: tc.class, CPU: v1alpha2.CPUSpec{Cores: tc.cores}},
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns", Name: "vm"}}
		req.Object.Raw, _ = json.Marshal(vm)
		resp := v.Handle(context.Background(), req)
		if resp.Allowed != tc.allowed {
			t.Errorf("class %q, %d cores: allowed %v, want %v (%+v)", tc.class, tc.cores, resp.Allowed, tc.allowed, resp.Result)
		}
		if !tc.allowed && resp.Result != nil && resp.Result.Message != `VirtualMachine.virtualization.deckhouse.io "vm" is invalid: spec.cpu.cores: Invalid value: 4: virtual machine vm has no valid size policy in vm class small` {
			t.Errorf("message %q", resp.Result.Message)
		}
	}
}
