package rewrite

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

func TestOpenAPIRoot(t *testing.T) {
	rw := New(rules.Default())
	in := `{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=A"},` +
		`"apis/internal.virtualization.deckhouse.io/v1":{"serverRelativeURL":"/openapi/v3/apis/internal.virtualization.deckhouse.io/v1?hash=B"},` +
		`"apis/kubevirt.io/v1":{"serverRelativeURL":"/openapi/v3/apis/kubevirt.io/v1?hash=C"},` +
		`"apis/subresources.kubevirt.io/v1":{"serverRelativeURL":"/openapi/v3/apis/subresources.kubevirt.io/v1?hash=D"}}}`
	out, err := rw.OpenAPIRoot([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]struct{ ServerRelativeURL string }
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"api/v1":                           "/openapi/v3/api/v1?hash=A",
		"apis/kubevirt.io/v1":              "/openapi/v3/apis/kubevirt.io/v1?hash=B",
		"apis/subresources.kubevirt.io/v1": "/openapi/v3/apis/subresources.kubevirt.io/v1?hash=D",
	}
	if len(doc.Paths) != len(want) {
		t.Fatalf("paths %v, want %v (the stock kubevirt.io entry hidden)", doc.Paths, want)
	}
	for k, v := range want {
		if doc.Paths[k].ServerRelativeURL != v {
			t.Errorf("%s -> %q, want %q", k, doc.Paths[k].ServerRelativeURL, v)
		}
	}
	if _, err := rw.OpenAPIRoot([]byte(`{"paths":`)); err == nil {
		t.Error("a broken index was accepted")
	}
}

func TestOpenAPIPathAndDocument(t *testing.T) {
	rw := New(rules.Default())
	for in, want := range map[string]string{
		"/openapi/v3/apis/kubevirt.io/v1":               "/openapi/v3/apis/internal.virtualization.deckhouse.io/v1",
		"/openapi/v3/apis/snapshot.kubevirt.io/v1beta1": "/openapi/v3/apis/snapshot.internal.virtualization.deckhouse.io/v1beta1",
		"/openapi/v3/apis/apps/v1":                      "/openapi/v3/apis/apps/v1",
		"/openapi/v3":                                   "/openapi/v3",
	} {
		if got, _ := rw.OpenAPIPath(in); got != want {
			t.Errorf("OpenAPIPath(%s) = %s, want %s", in, got, want)
		}
	}
	doc := `{"paths":{"/apis/internal.virtualization.deckhouse.io/v1/namespaces/{namespace}/internalvirtualizationvirtualmachines/{name}":{"get":{"x-kubernetes-group-version-kind":{"group":"internal.virtualization.deckhouse.io","kind":"InternalVirtualizationVirtualMachine","version":"v1"}}}},` +
		`"components":{"schemas":{"io.deckhouse.virtualization.internal.v1.InternalVirtualizationVirtualMachine":{"x-kubernetes-group-version-kind":[{"group":"internal.virtualization.deckhouse.io","kind":"InternalVirtualizationVirtualMachine","version":"v1"}]},` +
		`"io.k8s.api.core.v1.Pod":{"x-kubernetes-group-version-kind":[{"group":"","kind":"Pod","version":"v1"}]}}}}`
	out, err := rw.OpenAPIDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}"`,
		`{"group":"kubevirt.io","kind":"VirtualMachine","version":"v1"}`,
		`[{"group":"kubevirt.io","kind":"VirtualMachine","version":"v1"}]`,
		`[{"group":"","kind":"Pod","version":"v1"}]`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("document lacks %s:\n%s", want, out)
		}
	}
}
