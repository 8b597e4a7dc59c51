package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

var fuzzMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}

// FuzzRoundTripRequest: whatever the component sends, the engine never panics and either forwards
// one request or answers a Status without forwarding. A forwarded body it rewrote is well-formed
// JSON: a body it cannot rewrite is refused, never sent on half-renamed.
func FuzzRoundTripRequest(f *testing.F) {
	f.Add(uint8(0), vmPath+"/vm", "labelSelector=kubevirt.io%2Fx%3Dy", "", []byte(nil))
	f.Add(uint8(1), vmPath, "", "application/json", []byte(vmJSON))
	f.Add(uint8(2), vmPath+"/vm/status", "", "application/json", []byte(`{"kind":`))
	f.Add(uint8(3), vmPath+"/vm", "", "application/json-patch+json", []byte(`[{"op":"test","path":"/metadata/labels/kubevirt.io~1x","value":"1"}]`))
	f.Add(uint8(3), vmPath+"/vm", "fieldManager=x", "application/apply-patch+yaml", []byte("metadata:\n  labels: {kubevirt.io/x: y}\n"))
	f.Add(uint8(3), "/api/v1/namespaces/ns/pods/p", "", "application/strategic-merge-patch+json", []byte(`{"metadata":{"$setElementOrder/finalizers":["kubevirt.io/a"]}}`))
	f.Add(uint8(1), "/api/v1/namespaces/ns/pods", "", "application/vnd.kubernetes.protobuf", []byte("k8s\x00\n\x02v1"))
	f.Add(uint8(0), "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "fieldSelector=metadata.name%3Dvirtualmachines.kubevirt.io&watch=true", "", []byte(nil))
	f.Add(uint8(0), "/apis", "labelSelector=a+in+(b", "", []byte(nil))
	f.Add(uint8(4), "/apis/kubevirt.io/v1/watch/namespaces/ns/virtualmachines", "", "", []byte(nil))
	f.Add(uint8(1), "/api/v1/namespaces/ns/pods/p/exec", "command=sh", "", []byte("\x00\x01"))
	f.Fuzz(func(t *testing.T, m uint8, path, query, ct string, body []byte) {
		up := &stub{}
		rt, _ := newEngine(up)
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		req := (&http.Request{
			Method: method, URL: &url.URL{Scheme: "http", Host: "upstream", Path: path, RawQuery: query},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "upstream", Header: http.Header{},
		}).WithContext(context.Background())
		if len(body) > 0 {
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip returned an error for a client request: %v", err)
		}
		got, _ := io.ReadAll(resp.Body) // the stub's "{}" restores fine; only the Status matters here
		resp.Body.Close()
		calls := up.calls()
		switch len(calls) {
		case 0:
			var s status
			if err := json.Unmarshal(got, &s); err != nil || s.Kind != "Status" || s.Code != resp.StatusCode || s.Code < 400 {
				t.Fatalf("not forwarded, yet the answer is not a Status: %d %q", resp.StatusCode, got)
			}
		case 1, 2:
			// Two: a JSON patch of an owner reference's field reads the object first.
			if len(calls) == 2 && (calls[0].Method != "GET" || method != "PATCH") {
				t.Fatalf("forwarded %s and %s", calls[0].Method, calls[1].Method)
			}
			fwd := calls[len(calls)-1]
			if !rt.rewrites(rewrite.ParsePath(path)) || len(body) == 0 || bytes.Equal(fwd.Body, body) {
				return
			}
			if !json.Valid(fwd.Body) {
				t.Fatalf("forwarded a rewritten body that is not JSON:\n in %q\nout %q", body, fwd.Body)
			}
		default:
			t.Fatalf("forwarded %d requests", len(calls))
		}
	})
}
