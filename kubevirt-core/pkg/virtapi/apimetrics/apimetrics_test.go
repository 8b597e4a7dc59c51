package apimetrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSubresourceRoute(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/apis/subresources.kubevirt.io/v1", "discovery"},
		{"/apis/subresources.kubevirt.io/v1/", "discovery"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start", "virtualmachines/start"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console", "virtualmachineinstances/console"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/portforward/22/tcp", "virtualmachineinstances/portforward"},
		// Made-up names must not become series of their own.
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/x-1", "other"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/pods/p/start", "other"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm", "other"},
		{"/healthz", "healthz"},
		{"/apis/subresources.kubevirt.io/v1alpha3/namespaces/ns/virtualmachines/vm/stop", "virtualmachines/stop"},
		{"/apis/subresources.kubevirt.io/v1/version", "version"},
		{"/apis/subresources.kubevirt.io/v1alpha3/healthz", "healthz"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/memorydump", "virtualmachines/memorydump"},
		{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/sev/fetchcertchain", "virtualmachineinstances/sev"},
		{"/apis/subresources.kubevirt.io/v2/version", "other"},
		{"/apis/subresources.kubevirt.io/v1/x", "other"},
		{"/version", "other"},
	} {
		if got := SubresourceRoute(tc.path); got != tc.want {
			t.Errorf("SubresourceRoute(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestWebhookRoute(t *testing.T) {
	route := WebhookRoute("/a", "/b")
	for path, want := range map[string]string{"/a": "/a", "/b": "/b", "/c": "other"} {
		if got := route(path); got != want {
			t.Errorf("route(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestInstrumentCountsByRouteAndCode(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Instrument("subresources", SubresourceRoute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stop") {
			w.WriteHeader(http.StatusConflict)
		}
	}))
	for _, p := range []string{"start", "stop", "stop"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/apis/subresources.kubevirt.io/v1/namespaces/n/virtualmachines/v/"+p, nil))
	}
	want := `
# HELP kubevirt_virt_api_requests_total Requests served by virt-api, by server, route, method and HTTP code.
# TYPE kubevirt_virt_api_requests_total counter
kubevirt_virt_api_requests_total{code="200",method="put",route="virtualmachines/start",server="subresources"} 1
kubevirt_virt_api_requests_total{code="409",method="put",route="virtualmachines/stop",server="subresources"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubevirt_virt_api_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.durations); n != 2 {
		t.Errorf("%d duration series, want 2", n)
	}
}
