package vmvalidation

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
)

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
		{class: "", cores: 4, allowed: true}, // no class: the defaulting webhook found no default
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
