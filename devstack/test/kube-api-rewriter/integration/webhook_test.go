package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kube-api-rewriter/pkg/proxy"
)

const denial = "spec.template.spec.domain.devices.disks[0].Name 'x' not found."

// componentWebhook is the KubeVirt-speaking webhook server: it must only ever see kubevirt.io.
type componentWebhook struct {
	mu   sync.Mutex
	seen []string // group/kind of each reviewed object, as the component saw it
}

func (c *componentWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(review.Request.Object.Raw, &obj)
	c.mu.Lock()
	c.seen = append(c.seen, review.Request.Kind.Group+"/"+review.Request.Kind.Kind+" "+obj.APIVersion+"/"+obj.Kind)
	c.mu.Unlock()

	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	switch r.URL.Path {
	case "/validate-virtualmachine":
		if obj.Metadata.Labels["kubevirt.io/deny"] != "" {
			resp.Allowed = false
			resp.Result = &metav1.Status{Message: denial, Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity}
		}
	case "/mutate-virtualmachine":
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
		resp.Patch = []byte(`[{"op":"add","path":"/metadata/labels/kubevirt.io~1mutated","value":"yes"}]`)
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// A real webhook configuration for the renamed VM calls the component's webhook server through
// the rewriter's webhook listener: the server sees kubevirt.io, its patch lands renamed, and its
// denial reaches the client verbatim.
func TestWebhooksThroughRewriter(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)

	// The component's webhook server, on loopback as in a pod.
	component := &componentWebhook{}
	compCert, _ := testenv.ServingCert(t, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	compLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{compCert}})
	if err != nil {
		t.Fatal(err)
	}
	compSrv := &http.Server{Handler: component}
	go func() { _ = compSrv.Serve(compLn) }()
	t.Cleanup(func() { _ = compSrv.Close() })

	// The rewriter's webhook listener, where the apiserver can reach it.
	gw := fx.env.Net.GatewayIP().String()
	hookCert, caPEM := testenv.ServingCert(t, []string{"rewriter-webhook"}, []net.IP{net.ParseIP(gw)})
	hookLn, err := tls.Listen("tcp", net.JoinHostPort(gw, "0"), &tls.Config{Certificates: []tls.Certificate{hookCert}})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("https://" + compLn.Addr().String())
	hook := &proxy.Webhook{
		Rewriter: fx.rewriter, Target: target,
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	hookSrv := &http.Server{Handler: hook}
	go func() { _ = hookSrv.Serve(hookLn) }()
	t.Cleanup(func() { _ = hookSrv.Close() })
	base := "https://" + hookLn.Addr().String()

	// Configurations as the cluster holds them: renamed group and resource, scoped to the namespace.
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{internalVMs.Group}, APIVersions: []string{"v1"}, Resources: []string{internalVMs.Resource},
		},
	}}
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	scope := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		u := base + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caPEM}
	}
	admission := fx.env.Kube.AdmissionregistrationV1()
	mwc, err := admission.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "rewriter-test-"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.vm.test.d8v.io", ClientConfig: client("/mutate-virtualmachine"), Rules: rules,
			SideEffects: &none, FailurePolicy: &fail, NamespaceSelector: scope, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	})
	vwc, err := admission.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "rewriter-test-"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.vm.test.d8v.io", ClientConfig: client("/validate-virtualmachine"), Rules: rules,
			SideEffects: &none, FailurePolicy: &fail, NamespaceSelector: scope, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})

	// Webhook configurations take effect asynchronously: wait until a probe is denied.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": internalVMs.GroupVersion().String(), "kind": "InternalVirtualizationVirtualMachine",
		"metadata": map[string]any{"generateName": "probe-", "labels": map[string]any{renamedLabelPrefix + "/deny": "yes"}},
	}}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		created, err := fx.env.Dynamic.Resource(internalVMs).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{})
		if err == nil {
			_ = fx.env.Dynamic.Resource(internalVMs).Namespace(ns).Delete(ctx, created.GetName(), metav1.DeleteOptions{})
			return false, nil
		}
		return strings.Contains(err.Error(), denial), nil
	})
	if err != nil {
		t.Fatalf("webhooks never became active: %v", err)
	}

	forEachMode(t, func(t *testing.T, fx *fixture, m mode) {
		c := m.typed(t)
		denied := newVM(ns, "denied-"+m.name)
		denied.Labels["kubevirt.io/deny"] = "yes"
		err := c.Create(ctx, denied)
		if err == nil || !strings.Contains(err.Error(), denial) {
			t.Fatalf("create of a VM the webhook denies: %v, want the message %q", err, denial)
		}
		allowed := newVM(ns, "allowed-"+m.name)
		if err := c.Create(ctx, allowed); err != nil {
			t.Fatalf("create: %v", err)
		}
		if allowed.Labels["kubevirt.io/mutated"] != "yes" {
			t.Errorf("the mutating webhook's patch did not come back restored: %v", allowed.Labels)
		}
		if got := stored(t, fx, ns, allowed.Name).GetLabels(); got[renamedLabelPrefix+"/mutated"] != "yes" {
			t.Errorf("the mutating webhook's patch is not stored renamed: %v", got)
		}
	})

	component.mu.Lock()
	defer component.mu.Unlock()
	if len(component.seen) == 0 {
		t.Fatal("the component's webhook server was never called")
	}
	for _, s := range component.seen {
		if s != "kubevirt.io/VirtualMachine kubevirt.io/v1/VirtualMachine" {
			t.Errorf("the component's webhook server saw %q", s)
		}
	}
}
