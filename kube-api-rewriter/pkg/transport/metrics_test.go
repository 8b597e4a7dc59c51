package transport

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetrics checks the labels a request leaves behind: resource names in the component's view
// (bounded by resource, never by object name), the Kubernetes verb, the HTTP code, and which
// payloads were rewritten or failed.
func TestMetrics(t *testing.T) {
	type series map[string]float64 // "payload/direction" -> value
	for _, tc := range []struct {
		name       string
		method     string
		target     string
		ct         string
		body       string
		code       int   // upstream answer
		upErr      error // upstream transport failure
		respBody   string
		wantLabels [3]string // resource, verb, code
		rewrites   series
		errors     series
	}{
		{name: "get", method: "GET", target: vmPath + "/vm", respBody: vmJSONC,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "get", "200"}, rewrites: series{"object/restore": 1}},
		{name: "list", method: "GET", target: "/api/v1/namespaces/ns/pods", respBody: `{"kind":"PodList","apiVersion":"v1","items":[]}`,
			wantLabels: [3]string{"pods", "list", "200"}, rewrites: series{"object/restore": 1}},
		{name: "create", method: "POST", target: vmPath, ct: "application/json", body: vmJSON, code: http.StatusCreated, respBody: vmJSONC,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "create", "201"}, rewrites: series{"object/rename": 1, "object/restore": 1}},
		{name: "status update", method: "PUT", target: vmPath + "/vm/status", ct: "application/json", body: vmJSON, respBody: vmJSONC,
			wantLabels: [3]string{"virtualmachines.kubevirt.io/status", "update", "200"}, rewrites: series{"object/rename": 1, "object/restore": 1}},
		{name: "patch", method: "PATCH", target: vmPath + "/vm", ct: "application/json-patch+json", body: `[{"op":"remove","path":"/metadata/labels/kubevirt.io~1x"}]`, respBody: vmJSONC,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "patch", "200"}, rewrites: series{"patch/rename": 1, "object/restore": 1}},
		{name: "delete collection", method: "DELETE", target: vmPath, respBody: `{"kind":"Status","apiVersion":"v1","status":"Success"}`,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "deletecollection", "200"}, rewrites: series{"object/restore": 1}},
		{name: "watch", method: "GET", target: vmPath + "?watch=true", respBody: `{"type":"ADDED","object":` + vmJSONC + "}\n" + `{"type":"DELETED","object":` + vmJSONC + "}\n",
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "watch", "200"}, rewrites: series{"watch_event/restore": 2}},
		{name: "not found", method: "GET", target: vmPath + "/missing", code: http.StatusNotFound,
			respBody:   `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "get", "404"}, rewrites: series{"object/restore": 1}},
		{name: "discovery", method: "GET", target: "/apis/kubevirt.io/v1", respBody: `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"IG/v1","resources":[]}`,
			wantLabels: [3]string{"discovery", "get", "200"}, rewrites: series{"object/restore": 1}},
		{name: "malformed body", method: "POST", target: vmPath, ct: "application/json", body: `{"kind":`,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "create", "400"}, errors: series{"object/rename": 1}},
		{name: "malformed patch", method: "PATCH", target: vmPath + "/vm", ct: "application/merge-patch+json", body: `{"metadata":[}`,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "patch", "400"}, errors: series{"patch/rename": 1}},
		{name: "malformed answer", method: "GET", target: vmPath + "/vm", respBody: `{"kind":"InternalVirtualizationVirtualMachine",`,
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "get", "200"}, errors: series{"object/restore": 1}},
		{name: "exec passthrough", method: "POST", target: "/api/v1/namespaces/ns/pods/p/exec?command=sh", respBody: "",
			wantLabels: [3]string{"pods/exec", "create", "200"}},
		// Made-up paths must not create series: a resource is named when it is known or served.
		{name: "made-up resource", method: "GET", target: "/apis/kubevirt.io/v1/namespaces/ns/x4f9q2", code: http.StatusNotFound, respBody: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`,
			wantLabels: [3]string{"other", "list", "404"}, rewrites: series{"object/restore": 1}},
		{name: "made-up group", method: "GET", target: "/apis/x7.example/v1/things/a", code: http.StatusForbidden, respBody: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`,
			wantLabels: [3]string{"other", "get", "403"}, rewrites: series{"object/restore": 1}},
		{name: "made-up subresource", method: "GET", target: vmPath + "/vm/zz81", code: http.StatusNotFound, respBody: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`,
			wantLabels: [3]string{"virtualmachines.kubevirt.io/other", "get", "404"}, rewrites: series{"object/restore": 1}},
		{name: "served resource of another group", method: "GET", target: "/apis/example.com/v1/widgets", respBody: `{"kind":"WidgetList","apiVersion":"example.com/v1","items":[]}`,
			wantLabels: [3]string{"widgets.example.com", "list", "200"}, rewrites: series{"object/restore": 1}},
		{name: "known resource that fails", method: "GET", target: "/api/v1/namespaces/ns/pods/gone", code: http.StatusNotFound, respBody: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`,
			wantLabels: [3]string{"pods", "get", "404"}, rewrites: series{"object/restore": 1}},
		{name: "non-resource", method: "GET", target: "/healthz", respBody: "ok",
			wantLabels: [3]string{"nonresource", "get", "200"}},
		{name: "upstream failure", method: "GET", target: vmPath + "/vm", upErr: errors.New("connection refused"),
			wantLabels: [3]string{"virtualmachines.kubevirt.io", "get", "error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				code := tc.code
				if code == 0 {
					code = http.StatusOK
				}
				return unknownLength(response(req, code, "application/json", c(tc.respBody)))
			}}
			var next http.RoundTripper = up
			if tc.upErr != nil {
				next = rtFunc(func(*http.Request) (*http.Response, error) { return nil, tc.upErr })
			}
			rt, m := newEngine(next)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			resp, err := rt.RoundTrip(newRequest(t, tc.method, tc.target, tc.ct, body))
			if tc.upErr != nil {
				if err == nil {
					t.Fatal("upstream failure not returned")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				_, _ = readBody(resp) // the malformed answer fails here, as it should
				resp.Body.Close()
			}
			if n := testutil.CollectAndCount(m.Requests); n != 1 {
				t.Errorf("%d requests_total series, want 1", n)
			}
			l := tc.wantLabels
			if v := testutil.ToFloat64(m.Requests.WithLabelValues("api", l[0], l[1], l[2])); v != 1 {
				t.Errorf("requests_total{api,%s,%s,%s} = %v, want 1", l[0], l[1], l[2], v)
			}
			if n := testutil.CollectAndCount(m.Duration); n != 1 {
				t.Errorf("%d duration series, want 1", n)
			}
			check := func(name string, want series, got func(payload, direction string) float64, total float64) {
				var sum float64
				for k, v := range want {
					p, d, _ := strings.Cut(k, "/")
					if g := got(p, d); g != v {
						t.Errorf("%s{%s,%s} = %v, want %v", name, p, d, g, v)
					}
					sum += v
				}
				if total != sum {
					t.Errorf("%s total %v, want %v", name, total, sum)
				}
			}
			check("rewrites_total", tc.rewrites, func(p, d string) float64 { return counterValue(m.Rewrites, p, d) }, sumCounter(m.Rewrites))
			check("rewrite_errors_total", tc.errors, func(p, d string) float64 { return counterValue(m.RewriteErrors, p, d) }, sumCounter(m.RewriteErrors))
		})
	}
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
