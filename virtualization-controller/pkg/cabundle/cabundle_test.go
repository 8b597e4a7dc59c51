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
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hooks"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "a.example.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc}},
			{Name: "b.example.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc, CABundle: []byte("old")}},
		},
	}
	kube := fake.NewClientset(cfg)
	if err := NewPatcher(kube, "hooks", []byte("CA"), logr.Discard(), 0).Patch(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), "hooks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range got.Webhooks {
		if string(w.ClientConfig.CABundle) != "CA" || w.ClientConfig.Service == nil || w.ClientConfig.Service.Name != "svc" {
			t.Fatalf("webhook %s: %+v", w.Name, w.ClientConfig)
		}
	}
	if err := NewPatcher(kube, "missing", []byte("CA"), logr.Discard(), 0).Patch(context.Background()); err == nil {
		t.Fatal("patching a missing configuration succeeded")
	}
}
