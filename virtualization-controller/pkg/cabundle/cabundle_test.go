package cabundle

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPatch(t *testing.T) {
	svc := &admissionregistrationv1.ServiceReference{Namespace: "ns", Name: "svc"}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hooks"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "a.example.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc}},
			{Name: "b.example.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc, CABundle: []byte("old")}},
		},
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hooks"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "m.example.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc}},
		},
	}
	kube := fake.NewClientset(validating, mutating)
	if err := NewPatcher(kube, "hooks", []byte("CA"), logr.Discard(), 0).Patch(context.Background()); err != nil {
		t.Fatal(err)
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "hooks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "hooks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	configs := []admissionregistrationv1.WebhookClientConfig{v.Webhooks[0].ClientConfig, v.Webhooks[1].ClientConfig, m.Webhooks[0].ClientConfig}
	for i, c := range configs {
		if string(c.CABundle) != "CA" || c.Service == nil || c.Service.Name != "svc" {
			t.Fatalf("webhook %d: %+v", i, c)
		}
	}
	if err := NewPatcher(kube, "missing", []byte("CA"), logr.Discard(), 0).Patch(context.Background()); err == nil {
		t.Fatal("patching a missing configuration succeeded")
	}
	only := fake.NewClientset(validating.DeepCopy())
	if err := NewPatcher(only, "hooks", []byte("CA"), logr.Discard(), 0).Patch(context.Background()); err == nil {
		t.Fatal("patching without the mutating configuration succeeded")
	}
}
