package vmipvalidation

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
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

func TestHandle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	held := func(name, ns, holder string) *v1alpha2.VirtualMachineIPAddressLease {
		l := &v1alpha2.VirtualMachineIPAddressLease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if holder != "" {
			l.Spec.VirtualMachineIPAddressRef = &v1alpha2.VirtualMachineIPAddressLeaseIPAddressRef{Namespace: ns, Name: holder}
		}
		return l
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		held("ip-10-66-10-5", "ns", "other"), held("ip-10-66-10-6", "", ""), held("ip-10-66-10-7", "ns", "me"),
	).Build()
	rng, _ := ipam.ParseRange([]string{"10.66.10.0/24"})
	v := NewValidator(c, rng, admission.NewDecoder(scheme))
	for _, tc := range []struct {
		name, typ, ip string
		allowed       bool
		message       string
	}{
		{name: "auto", typ: "Auto", allowed: true},
		{name: "static, free", typ: "Static", ip: "10.66.10.4", allowed: true},
		{name: "static, released", typ: "Static", ip: "10.66.10.6", allowed: true},
		{name: "static, its own", typ: "Static", ip: "10.66.10.7", allowed: true},
		{name: "static, out of range", typ: "Static", ip: "10.66.11.4",
			message: `VirtualMachineIPAddress.virtualization.deckhouse.io "me" is invalid: spec.staticIP: Invalid value: "10.66.11.4": The requested address 10.66.11.4 is out of the valid range`},
		{name: "static, another's", typ: "Static", ip: "10.66.10.5",
			message: `VirtualMachineIPAddress.virtualization.deckhouse.io "me" is invalid: spec.staticIP: Invalid value: "10.66.10.5": the VirtualMachineIPAddress cannot be created: the specified IP address 10.66.10.5 has already been allocated and has not been released`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := v1alpha2.VirtualMachineIPAddress{
				TypeMeta:   metav1.TypeMeta{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachineIPAddress"},
				ObjectMeta: metav1.ObjectMeta{Name: "me", Namespace: "ns"},
				Spec:       v1alpha2.VirtualMachineIPAddressSpec{Type: v1alpha2.VirtualMachineIPAddressType(tc.typ), StaticIP: tc.ip},
			}
			raw, _ := json.Marshal(obj)
			resp := v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "ns", Name: "me", Object: runtime.RawExtension{Raw: raw},
			}})
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.allowed {
				return
			}
			update := v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, Namespace: "ns", Name: "me", Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw},
			}})
			if !update.Allowed {
				t.Fatalf("an update (the spec is immutable) was denied: %+v", update.Result)
			}
			if resp.Result.Message != tc.message || resp.Result.Code != 422 || resp.Result.Details.Causes[0].Field != "spec.staticIP" {
				t.Fatalf("result %+v\nwant message %q", resp.Result, tc.message)
			}
		})
	}
}
