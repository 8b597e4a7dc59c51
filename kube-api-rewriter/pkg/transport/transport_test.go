package transport

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	vmPath  = "/apis/kubevirt.io/v1/namespaces/ns/virtualmachines"
	vmPathC = "/apis/IG/v1/namespaces/ns/internalvirtualizationvirtualmachines"

	vmJSON  = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns","labels":{"kubevirt.io/created-by":"u","app":"x"},"finalizers":["kubevirt.io/virtualMachineControllerFinalize"]},"spec":{"running":true}}`
	vmJSONC = `{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"vm","namespace":"ns","labels":{"IK/created-by":"u","app":"x"},"finalizers":["IK/virtualMachineControllerFinalize"]},"spec":{"running":true}}`
)

// TestRequestRename checks what reaches the cluster: the path, the selectors and the body renamed,
// and only media types the engine can read.
func TestRequestRename(t *testing.T) {
	for _, tc := range []struct {
		name        string
		method      string
		target      string // path and query, component view
		ct          string
		accept      string
		body        string
		wantPath    string // cluster view (IG/IK expanded)
		wantQuery   string
		wantBody    string // JSON-compared; empty means no body
		wantAccept  string
		wantNoGzip  bool
		wantCT      string // Content-Type forwarded, when it matters
		wantRawBody bool   // the body is not JSON (compare bytes)
	}{
		{name: "get", method: "GET", target: vmPath + "/vm", wantPath: vmPathC + "/vm"},
		{name: "list with selectors", method: "GET",
			target:    vmPath + "?labelSelector=" + url.QueryEscape("kubevirt.io/created-by=u,app in (x)") + "&fieldSelector=" + url.QueryEscape("metadata.name=vm") + "&limit=500",
			wantPath:  vmPathC,
			wantQuery: "labelSelector=" + url.QueryEscape(c("IK/created-by=u,app in (x)")) + "&fieldSelector=" + url.QueryEscape("metadata.name=vm") + "&limit=500"},
		{name: "event field selector", method: "GET",
			target:    "/api/v1/namespaces/ns/events?fieldSelector=" + url.QueryEscape("involvedObject.kind=VirtualMachine,involvedObject.apiVersion=kubevirt.io/v1"),
			wantPath:  "/api/v1/namespaces/ns/events",
			wantQuery: "fieldSelector=" + url.QueryEscape(c("involvedObject.kind=InternalVirtualizationVirtualMachine,involvedObject.apiVersion=IG/v1"))},
		{name: "crd by name", method: "GET", target: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualmachines.kubevirt.io",
			wantPath: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/internalvirtualizationvirtualmachines.IG"},
		{name: "create", method: "POST", target: vmPath, ct: "application/json", body: vmJSON, wantPath: vmPathC, wantBody: vmJSONC},
		{name: "create in yaml", method: "POST", target: vmPath, ct: "application/yaml",
			body:     "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm\n  labels:\n    kubevirt.io/created-by: u\n",
			wantPath: vmPathC, wantCT: "application/json",
			wantBody: `{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"vm","labels":{"IK/created-by":"u"}}}`},
		{name: "update in yaml", method: "PUT", target: "/api/v1/namespaces/ns/pods/p", ct: "application/yaml; charset=utf-8",
			body:     "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  finalizers: [kubevirt.io/f]\n",
			wantPath: "/api/v1/namespaces/ns/pods/p", wantCT: "application/json",
			wantBody: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","finalizers":["IK/f"]}}`},
		{name: "create without content type", method: "POST", target: vmPath, body: vmJSON, wantPath: vmPathC, wantBody: vmJSONC},
		{name: "update status", method: "PUT", target: vmPath + "/vm/status", ct: "application/json; charset=utf-8", body: vmJSON, wantPath: vmPathC + "/vm/status", wantBody: vmJSONC},
		{name: "pod with kubevirt labels", method: "POST", target: "/api/v1/namespaces/ns/pods", ct: "application/json",
			body:     `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"kubevirt.io":"virt-launcher"},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"vm","uid":"1"}]}}`,
			wantPath: "/api/v1/namespaces/ns/pods",
			wantBody: `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"IK":"virt-launcher"},"ownerReferences":[{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachineInstance","name":"vm","uid":"1"}]}}`},
		{name: "json patch with test op", method: "PATCH", target: vmPath + "/vm", ct: "application/json-patch+json",
			body:     `[{"op":"test","path":"/metadata/labels/kubevirt.io~1created-by","value":"u"},{"op":"add","path":"/metadata/finalizers/-","value":"kubevirt.io/f"},{"op":"remove","path":"/metadata/labels/kubevirt.io~1created-by"}]`,
			wantPath: vmPathC + "/vm",
			wantBody: `[{"op":"test","path":"/metadata/labels/IK~1created-by","value":"u"},{"op":"add","path":"/metadata/finalizers/-","value":"IK/f"},{"op":"remove","path":"/metadata/labels/IK~1created-by"}]`},
		{name: "merge patch keeps null", method: "PATCH", target: vmPath + "/vm", ct: "application/merge-patch+json",
			body: `{"metadata":{"labels":{"kubevirt.io/x":null,"kubevirt.io/y":"1"}}}`, wantPath: vmPathC + "/vm",
			wantBody: `{"metadata":{"labels":{"IK/x":null,"IK/y":"1"}}}`},
		{name: "strategic merge patch", method: "PATCH", target: "/api/v1/namespaces/ns/pods/p", ct: "application/strategic-merge-patch+json",
			body:     `{"metadata":{"$setElementOrder/finalizers":["kubevirt.io/a"],"finalizers":["kubevirt.io/a"],"labels":{"kubevirt.io":"virt-launcher"}}}`,
			wantPath: "/api/v1/namespaces/ns/pods/p",
			wantBody: `{"metadata":{"$setElementOrder/finalizers":["IK/a"],"finalizers":["IK/a"],"labels":{"IK":"virt-launcher"}}}`},
		{name: "apply json", method: "PATCH", target: vmPath + "/vm?fieldManager=m&force=true", ct: "application/apply-patch+json", body: vmJSON,
			wantPath: vmPathC + "/vm", wantQuery: "fieldManager=m&force=true", wantBody: vmJSONC},
		{name: "apply yaml", method: "PATCH", target: vmPath + "/vm?fieldManager=m", ct: "application/apply-patch+yaml",
			body:     "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: vm\n  labels:\n    kubevirt.io/created-by: u\n",
			wantPath: vmPathC + "/vm", wantQuery: "fieldManager=m", wantCT: "application/apply-patch+yaml",
			wantBody: `{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"vm","labels":{"IK/created-by":"u"}}}`},
		{name: "protobuf pod converted to json", method: "POST", target: "/api/v1/namespaces/ns/pods", ct: "application/vnd.kubernetes.protobuf",
			body:     string(protobufPod(t)),
			wantPath: "/api/v1/namespaces/ns/pods", wantCT: "application/json",
			wantBody: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"virt-launcher-vm","namespace":"ns","labels":{"IK":"virt-launcher"}},"spec":{"containers":null},"status":{}}`},
		{name: "protobuf taken out of accept", method: "GET", target: vmPath, accept: "application/vnd.kubernetes.protobuf, application/json",
			wantPath: vmPathC, wantAccept: "application/json"},
		{name: "protobuf only falls back to json", method: "GET", target: "/api/v1/pods", accept: "application/vnd.kubernetes.protobuf",
			wantPath: "/api/v1/pods", wantAccept: "application/json"},
		{name: "table kept, protobuf table dropped", method: "GET", target: vmPath,
			accept:     "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
			wantPath:   vmPathC,
			wantAccept: "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"},
		{name: "aggregated discovery kept", method: "GET", target: "/apis",
			accept:     "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
			wantPath:   "/apis",
			wantAccept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList, application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList, application/json"},
		{name: "watch", method: "GET", target: vmPath + "?watch=true&labelSelector=" + url.QueryEscape("kubevirt.io/x"),
			wantPath: vmPathC, wantQuery: "watch=true&labelSelector=" + url.QueryEscape(c("IK/x"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{}
			rt, _ := newEngine(up)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			req := newRequest(t, tc.method, tc.target, tc.ct, body)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			// A client asking for gzip: the engine asks for it on its behalf, and inflates what it
			// restores itself (TestGzip).
			req.Header.Set("Accept-Encoding", "gzip, deflate")
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readAll(t, resp)
			calls := up.calls()
			if len(calls) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(calls))
			}
			got := calls[0]
			if got.Method != tc.method {
				t.Errorf("method %s, want %s", got.Method, tc.method)
			}
			if want := c(tc.wantPath); got.Path != want {
				t.Errorf("path %s, want %s", got.Path, want)
			}
			wantQuery := tc.wantQuery
			if wantQuery == "" {
				if _, q, ok := strings.Cut(tc.target, "?"); ok {
					wantQuery = q
				}
			}
			if got.Query != wantQuery {
				t.Errorf("query %s, want %s", got.Query, wantQuery)
			}
			if tc.wantBody != "" && !jsonEqual(t, got.Body, []byte(c(tc.wantBody))) {
				t.Errorf("body %s\nwant %s", got.Body, c(tc.wantBody))
			}
			if tc.wantBody == "" && len(got.Body) != 0 {
				t.Errorf("unexpected body %q", got.Body)
			}
			if tc.wantBody != "" && got.Header.Get("Content-Length") != "" && got.Header.Get("Content-Length") != strconv.Itoa(len(got.Body)) {
				t.Errorf("Content-Length %s for a %d-byte body", got.Header.Get("Content-Length"), len(got.Body))
			}
			wantAccept := tc.wantAccept
			if wantAccept == "" {
				wantAccept = "application/json"
			}
			if a := got.Header.Get("Accept"); a != wantAccept {
				t.Errorf("Accept %q, want %q", a, wantAccept)
			}
			if ae := got.Header.Get("Accept-Encoding"); ae != "gzip" {
				t.Errorf("Accept-Encoding %q forwarded on a rewritten request, want gzip alone", ae)
			}
			if tc.wantCT != "" && got.Header.Get("Content-Type") != tc.wantCT {
				t.Errorf("Content-Type %q, want %q", got.Header.Get("Content-Type"), tc.wantCT)
			}
		})
	}
}

// TestRequestRefused checks that a body the engine cannot rewrite is answered with a Status and
// never reaches the cluster half-renamed.
func TestRequestRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		method     string
		target     string
		ct         string
		body       string
		wantCode   int
		wantReason string
	}{
		{"protobuf of a kind the rewriter cannot read", "POST", vmPath, "application/vnd.kubernetes.protobuf", string(protobufUnknown(t, "kubevirt.io/v1", "VirtualMachine")), http.StatusUnsupportedMediaType, "UnsupportedMediaType"},
		{"undecodable protobuf", "PUT", "/api/v1/namespaces/ns/pods/p", "application/vnd.kubernetes.protobuf", "k8s\x00\n\x02v1", http.StatusBadRequest, "BadRequest"},
		{"malformed yaml create", "POST", vmPath, "application/yaml", "kind: [unclosed\n  - x: y: z", http.StatusBadRequest, "BadRequest"},
		{"xml create", "POST", vmPath, "application/xml", "<VirtualMachine/>", http.StatusUnsupportedMediaType, "UnsupportedMediaType"},
		{"unknown patch type", "PATCH", vmPath + "/vm", "application/x-unknown-patch", `{}`, http.StatusUnsupportedMediaType, "UnsupportedMediaType"},
		{"malformed create", "POST", vmPath, "application/json", `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"labels":{"kubevirt.io/x":}}}`, http.StatusBadRequest, "BadRequest"},
		{"truncated update", "PUT", vmPath + "/vm", "application/json", `{"apiVersion":"kubevirt.io/v1","kind":"Virt`, http.StatusBadRequest, "BadRequest"},
		{"trailing garbage", "POST", vmPath, "application/json", `{"kind":"VirtualMachine"} {"kind":"x"}`, http.StatusBadRequest, "BadRequest"},
		{"malformed json patch", "PATCH", vmPath + "/vm", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels/kubevirt.io~1x","value":]`, http.StatusBadRequest, "BadRequest"},
		{"json patch not an array", "PATCH", vmPath + "/vm", "application/json-patch+json", `{"op":"add"}`, http.StatusBadRequest, "BadRequest"},
		{"malformed merge patch", "PATCH", vmPath + "/vm", "application/merge-patch+json", `{"metadata":`, http.StatusBadRequest, "BadRequest"},
		{"malformed yaml apply", "PATCH", vmPath + "/vm", "application/apply-patch+yaml", "kind: [unclosed\n  - x: y: z", http.StatusBadRequest, "BadRequest"},
		// A watch over WebSocket would hand the component frames it cannot restore: refused, never
		// passed through unrenamed.
		{"websocket watch", "GET", vmPath + "?watch=true", "", "", http.StatusBadRequest, "BadRequest"},
		{"websocket watch of pods", "GET", "/api/v1/watch/namespaces/ns/pods", "", "", http.StatusBadRequest, "BadRequest"},
		{"upgrade on a renamed object", "GET", vmPath + "/vm", "", "", http.StatusBadRequest, "BadRequest"},
		{"unbalanced label selector", "GET", vmPath + "?labelSelector=" + url.QueryEscape("kubevirt.io/x in (a"), "", "", http.StatusBadRequest, "BadRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{}
			rt, m := newEngine(up)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			req := newRequest(t, tc.method, tc.target, tc.ct, body)
			if strings.HasPrefix(tc.name, "websocket") || strings.HasPrefix(tc.name, "upgrade") {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if n := len(up.calls()); n != 0 {
				t.Fatalf("forwarded %d requests; a body that cannot be rewritten must not reach the cluster", n)
			}
			if resp.StatusCode != tc.wantCode {
				t.Errorf("code %d, want %d", resp.StatusCode, tc.wantCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			s := statusOf(t, readAll(t, resp))
			if s.Code != tc.wantCode || s.Reason != tc.wantReason || s.Status != "Failure" || !strings.Contains(s.Message, "kube-api-rewriter") {
				t.Errorf("Status %+v", s)
			}
			if tc.wantCode == http.StatusBadRequest && tc.method != "GET" && sumCounter(m.RewriteErrors) != 1 {
				t.Errorf("rewrite_errors_total = %v, want 1", sumCounter(m.RewriteErrors))
			}
		})
	}
}

// TestResponseRestore checks what the component receives for the cluster's answers.
func TestResponseRestore(t *testing.T) {
	stockCRD := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io"},"spec":{"group":"kubevirt.io","names":{"kind":"VirtualMachine","plural":"virtualmachines"}}}`
	renamedCRD := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"internalvirtualizationvirtualmachines.IG"},"spec":{"group":"IG","names":{"kind":"InternalVirtualizationVirtualMachine","plural":"internalvirtualizationvirtualmachines"}}}`
	restoredCRD := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"virtualmachines.kubevirt.io"},"spec":{"group":"kubevirt.io","names":{"kind":"VirtualMachine","plural":"virtualmachines"}}}`
	for _, tc := range []struct {
		name     string
		method   string
		target   string
		code     int
		ct       string
		chunked  bool // upstream sends no Content-Length, like the apiserver for large lists
		upstream string
		want     string
	}{
		{name: "object", target: vmPath + "/vm", upstream: vmJSONC, want: vmJSON},
		{name: "created", method: "POST", target: vmPath, code: http.StatusCreated, upstream: vmJSONC, want: vmJSON},
		{name: "list streamed", target: vmPath, chunked: true,
			upstream: `{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachineList","metadata":{"resourceVersion":"7"},"items":[` + vmJSONC + `,` + vmJSONC + `]}`,
			want:     `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineList","metadata":{"resourceVersion":"7"},"items":[` + vmJSON + `,` + vmJSON + `]}`},
		{name: "pod list keeps stock labels preserved", target: "/api/v1/pods", chunked: true,
			upstream: `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"a","labels":{"IK":"virt-launcher","kubevirt.io":"stock"}}}]}`,
			want:     `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"a","labels":{"kubevirt.io":"virt-launcher","preserved-original-kubevirt.io":"stock"}}}]}`},
		{name: "404 names the original kind", target: vmPath + "/missing", code: http.StatusNotFound,
			upstream: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"internalvirtualizationvirtualmachines.IG \"missing\" not found","reason":"NotFound","details":{"name":"missing","group":"IG","kind":"internalvirtualizationvirtualmachines"},"code":404}`,
			want:     `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"virtualmachines.kubevirt.io \"missing\" not found","reason":"NotFound","details":{"name":"missing","group":"kubevirt.io","kind":"virtualmachines"},"code":404}`},
		{name: "table", target: vmPath,
			upstream: `{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[{"name":"Name","type":"string"},{"name":"Status","type":"string"}],"rows":[{"cells":["vm","Running"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"vm","labels":{"IK/x":"1"}}}}]}`,
			want:     `{"kind":"Table","apiVersion":"meta.k8s.io/v1","columnDefinitions":[{"name":"Name","type":"string"},{"name":"Status","type":"string"}],"rows":[{"cells":["vm","Running"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"vm","labels":{"kubevirt.io/x":"1"}}}}]}`},
		{name: "discovery group", target: "/apis/kubevirt.io",
			upstream: `{"kind":"APIGroup","apiVersion":"v1","name":"IG","versions":[{"groupVersion":"IG/v1","version":"v1"}],"preferredVersion":{"groupVersion":"IG/v1","version":"v1"}}`,
			want:     `{"kind":"APIGroup","apiVersion":"v1","name":"kubevirt.io","versions":[{"groupVersion":"kubevirt.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"kubevirt.io/v1","version":"v1"}}`},
		{name: "discovery group list hides stock group", target: "/apis",
			upstream: `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"kubevirt.io","versions":[{"groupVersion":"kubevirt.io/v1","version":"v1"}]},{"name":"IG","versions":[{"groupVersion":"IG/v1","version":"v1"}],"preferredVersion":{"groupVersion":"IG/v1","version":"v1"}}]}`,
			want:     `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"kubevirt.io","versions":[{"groupVersion":"kubevirt.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"kubevirt.io/v1","version":"v1"}}]}`},
		{name: "discovery resources", target: "/apis/kubevirt.io/v1",
			upstream: `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"IG/v1","resources":[{"name":"internalvirtualizationvirtualmachines","singularName":"internalvirtualizationvirtualmachine","namespaced":true,"kind":"InternalVirtualizationVirtualMachine","verbs":["get"],"shortNames":["intvirtvm"],"categories":["intvirt"]}]}`,
			want:     `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"kubevirt.io/v1","resources":[{"name":"virtualmachines","singularName":"virtualmachine","namespaced":true,"kind":"VirtualMachine","verbs":["get"],"shortNames":["vm"],"categories":["all"]}]}`},
		{name: "crd list hides the stock crd", target: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", chunked: true,
			upstream: `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{},"items":[` + stockCRD + `,` + renamedCRD + `]}`,
			want:     `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{},"items":[` + restoredCRD + `]}`},
		{name: "media type with charset", target: vmPath + "/vm", ct: "application/json; charset=utf-8", upstream: vmJSONC, want: vmJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				code, ct := tc.code, tc.ct
				if code == 0 {
					code = http.StatusOK
				}
				if ct == "" {
					ct = "application/json"
				}
				if tc.chunked {
					return unknownLength(response(req, code, ct, c(tc.upstream)))
				}
				return response(req, code, ct, c(tc.upstream))
			}}
			rt, m := newEngine(up)
			method := tc.method
			if method == "" {
				method = "GET"
			}
			var body []byte
			if method == "POST" {
				body = []byte(vmJSON)
			}
			resp, err := rt.RoundTrip(newRequest(t, method, tc.target, "application/json", body))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			got := readAll(t, resp)
			// A document restored in memory goes out with its restored length.
			if resp.ContentLength != int64(len(got)) || resp.Header.Get("Content-Length") != strconv.Itoa(len(got)) {
				t.Errorf("Content-Length %d/%q for a %d-byte restored body", resp.ContentLength, resp.Header.Get("Content-Length"), len(got))
			}
			if !jsonEqual(t, got, []byte(tc.want)) {
				t.Errorf("restored\n got %s\nwant %s", got, tc.want)
			}
			if n := counterValue(m.RewriteErrors, "object", "restore"); n != 0 {
				t.Errorf("rewrite errors %v", n)
			}
		})
	}
}

// TestPassthrough checks that requests the engine must not touch reach the cluster as sent, and
// their answers come back byte for byte, protobuf included.
func TestPassthrough(t *testing.T) {
	protoBody := "k8s\x00\n\x0f\n\x02v1\x12\x03Pod\x12\x2a\n\x07kubevirt.io\x12internal.virtualization.deckhouse.io"
	renamedJSON := c(`{"apiVersion":"IG/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"labels":{"IK":"x"}}}`)
	for _, tc := range []struct {
		name    string
		method  string
		target  string
		header  map[string]string
		body    string
		respCT  string
		respRaw string
		// rewritten: the request is renamed (wantPath, cluster view, when it differs), only the
		// answer passes through.
		rewritten bool
		wantPath  string
	}{
		{name: "exec", method: "POST", target: "/api/v1/namespaces/ns/pods/virt-launcher-vm/exec?command=sh&container=compute&labelSelector=kubevirt.io",
			header: map[string]string{"Accept": "*/*", "Accept-Encoding": "gzip"}, respCT: "text/plain", respRaw: "kubevirt.io/x internal.virtualization.deckhouse.io"},
		{name: "log", method: "GET", target: "/api/v1/namespaces/ns/pods/virt-launcher-vm/log?container=compute",
			header: map[string]string{"Accept-Encoding": "gzip"}, respCT: "text/plain", respRaw: renamedJSON},
		{name: "portforward", method: "POST", target: "/api/v1/namespaces/ns/pods/p/portforward",
			header: map[string]string{"Upgrade": "SPDY/3.1", "Connection": "Upgrade"}, respCT: "", respRaw: ""},
		{name: "websocket exec", method: "GET", target: "/api/v1/namespaces/ns/pods/p/exec?command=sh",
			header: map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}, respCT: "", respRaw: ""},
		{name: "console of another aggregated API", method: "GET", target: "/apis/subresources.example.com/v1/namespaces/ns/things/a/console",
			header: map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, respCT: "", respRaw: ""},
		{name: "vmi console", method: "GET", target: "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console",
			header: map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Protocol": "plain.kubevirt.io"}, respCT: "", respRaw: ""},
		{name: "subresources api", method: "PUT", target: "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start",
			header: map[string]string{"Content-Type": "application/json"}, body: `{"apiVersion":"kubevirt.io/v1","kind":"StartOptions"}`,
			respCT: "application/json", respRaw: `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"labels":{"kubevirt.io/x":"1"}}}`},
		{name: "cdi", method: "GET", target: "/apis/cdi.kubevirt.io/v1beta1/namespaces/ns/datavolumes?labelSelector=kubevirt.io%2Fx",
			header: map[string]string{"Accept": "application/vnd.kubernetes.protobuf"}, respCT: "application/vnd.kubernetes.protobuf", respRaw: protoBody},
		// The rules pass the module's own friendly API through: a user's kubevirt.io keys on it are
		// the user's, and protobuf and gzip stay as the client asked.
		{name: "friendly group create", method: "POST", target: "/apis/virtualization.deckhouse.io/v1alpha2/namespaces/ns/virtualmachines?labelSelector=kubevirt.io%2Ffoo",
			header: map[string]string{"Content-Type": "application/json", "Accept": "application/vnd.kubernetes.protobuf", "Accept-Encoding": "gzip"},
			body:   `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"labels":{"kubevirt.io/foo":"1"}}}`,
			respCT: "application/json", respRaw: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","metadata":{"labels":{"kubevirt.io/foo":"1","preserved-original-kubevirt.io/x":""}}}`},
		{name: "friendly group list", method: "GET", target: "/apis/virtualization.deckhouse.io/v1alpha2/virtualmachines",
			respCT: "application/json", respRaw: `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachineList","items":[{"metadata":{"labels":{"kubevirt.io/foo":"1"}}}]}`},
		{name: "friendly subresources", method: "GET", target: "/apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/ns/virtualmachines/vm/console",
			respCT: "application/json", respRaw: `{"kind":"Status","message":"kubevirt.io"}`},
		{name: "healthz", method: "GET", target: "/healthz", respCT: "text/plain", respRaw: "ok"},
		{name: "openapi v3 schema", method: "GET", target: "/openapi/v3/apis/apps/v1", header: map[string]string{"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"},
			respCT: "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", respRaw: protoBody},
		{name: "lease update in protobuf", method: "PUT", target: "/apis/coordination.k8s.io/v1/namespaces/ns/leases/virt-controller",
			header: map[string]string{"Content-Type": "application/vnd.kubernetes.protobuf", "Accept": "application/vnd.kubernetes.protobuf, */*", "Accept-Encoding": "gzip"},
			body:   protoBody, respCT: "application/vnd.kubernetes.protobuf", respRaw: protoBody},
		{name: "token review", method: "POST", target: "/apis/authentication.k8s.io/v1/tokenreviews",
			header: map[string]string{"Content-Type": "application/json"}, body: `{"spec":{"token":"kubevirt.io"}}`, respCT: "application/json", respRaw: renamedJSON},
		// On a rewritten path the cluster may still answer in protobuf (an old apiserver ignoring
		// Accept, or an aggregated server): the engine cannot read it and hands it over as is.
		{name: "protobuf answer on a rewritten path", method: "GET", target: "/api/v1/namespaces/ns/pods/p",
			respCT: "application/vnd.kubernetes.protobuf", respRaw: protoBody, rewritten: true},
		{name: "plain text error", method: "GET", target: vmPath + "/vm", respCT: "text/plain; charset=utf-8", respRaw: "internalvirtualizationvirtualmachines forbidden",
			rewritten: true, wantPath: vmPathC + "/vm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				return response(req, http.StatusOK, tc.respCT, tc.respRaw)
			}}
			rt, m := newEngine(up)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			req := newRequest(t, tc.method, tc.target, "", body)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			got := readAll(t, resp)
			if !bytes.Equal(got, []byte(tc.respRaw)) {
				t.Errorf("response changed:\n got %q\nwant %q", got, tc.respRaw)
			}
			if resp.ContentLength != int64(len(tc.respRaw)) {
				t.Errorf("ContentLength %d, want %d", resp.ContentLength, len(tc.respRaw))
			}
			calls := up.calls()
			if len(calls) != 1 {
				t.Fatalf("upstream saw %d requests", len(calls))
			}
			u, _ := url.Parse(tc.target)
			if tc.wantPath != "" {
				u.Path = c(tc.wantPath)
			}
			if calls[0].Path != u.Path || calls[0].Query != u.RawQuery {
				t.Errorf("forwarded %s?%s, want %s", calls[0].Path, calls[0].Query, tc.target)
			}
			if tc.rewritten {
				return
			}
			if !bytes.Equal(calls[0].Body, body) {
				t.Errorf("body changed: %q", calls[0].Body)
			}
			for k, v := range tc.header {
				if got := calls[0].Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if n := sumCounter(m.Rewrites); n != 0 {
				t.Errorf("rewrites_total moved by %v on a passthrough request", n)
			}
		})
	}
}

// TestLargeResponseStreamed: a document over inMemoryLimit is restored as it arrives, so its
// restored length is not known when the response is handed on.
func TestLargeResponseStreamed(t *testing.T) {
	items := strings.Repeat(","+c(vmJSONC), inMemoryLimit/len(vmJSONC)+1)[1:]
	want := strings.Repeat(","+vmJSON, inMemoryLimit/len(vmJSONC)+1)[1:]
	up := &stub{respond: func(req *http.Request) *http.Response {
		return unknownLength(response(req, http.StatusOK, "application/json", `{"apiVersion":"`+IG+`/v1","kind":"InternalVirtualizationVirtualMachineList","metadata":{},"items":[`+items+`]}`))
	}}
	rt, m := newEngine(up)
	resp, err := rt.RoundTrip(newRequest(t, "GET", vmPath, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "" {
		t.Errorf("Content-Length %d/%q for a streamed body", resp.ContentLength, resp.Header.Get("Content-Length"))
	}
	got := readAll(t, resp)
	if !jsonEqual(t, got, []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineList","metadata":{},"items":[`+want+`]}`)) {
		t.Errorf("restored list differs (%d bytes)", len(got))
	}
	if n := counterValue(m.RewriteErrors, "object", "restore"); n != 0 {
		t.Errorf("rewrite errors %v", n)
	}
}

// TestEmptyResponses: answers without a document are neither restored nor counted as errors.
func TestEmptyResponses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		code    int
		chunked bool
	}{
		{"head", "HEAD", http.StatusOK, false},
		{"no content", "DELETE", http.StatusNoContent, false},
		{"empty chunked", "GET", http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				if tc.chunked {
					return unknownLength(response(req, tc.code, "application/json", ""))
				}
				return response(req, tc.code, "application/json", "")
			}}
			rt, m := newEngine(up)
			resp, err := rt.RoundTrip(newRequest(t, tc.method, vmPath+"/vm", "", nil))
			if err != nil {
				t.Fatal(err)
			}
			if b := readAll(t, resp); len(b) != 0 || resp.StatusCode != tc.code {
				t.Errorf("got %d %q", resp.StatusCode, b)
			}
			if n := sumCounter(m.RewriteErrors); n != 0 {
				t.Errorf("rewrite_errors_total = %v for an empty body", n)
			}
		})
	}
}

// TestMalformedResponse: a broken document from the cluster must not reach the component looking
// complete; the body read fails instead. A truncated object used to end as a clean, empty 200.
func TestMalformedResponse(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"truncated list", `{"kind":"InternalVirtualizationVirtualMachineList","apiVersion":"IG/v1","items":[{"kind":"InternalVirtualizationVirtualMachine"},{"kind":`},
		{"truncated object", `{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"IG/v1",`},
		{"truncated after the key", `{"kind"`},
		{"not json", `<html>gateway timeout</html>`},
		{"two documents", `{"kind":"A"}{"kind":"B"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				return unknownLength(response(req, http.StatusOK, "application/json", c(tc.body)))
			}}
			rt, m := newEngine(up)
			resp, err := rt.RoundTrip(newRequest(t, "GET", vmPath, "", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got, err := readBody(resp); err == nil {
				t.Fatalf("a broken document was read without error: %q", got)
			}
			if n := counterValue(m.RewriteErrors, "object", "restore"); n != 1 {
				t.Errorf("rewrite_errors_total{object,restore} = %v, want 1", n)
			}
		})
	}
}

// protobufPod is a Pod as a typed client sends it by default.
func protobufPod(t testing.TB) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), "application/vnd.kubernetes.protobuf")
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm", Namespace: "ns", Labels: map[string]string{"kubevirt.io": "virt-launcher"}}}
	b, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), pod)
	if err != nil {
		t.Fatalf("encode pod: %v", err)
	}
	return b
}

// protobufUnknown is a well-formed protobuf envelope of a kind client-go does not know.
func protobufUnknown(t testing.TB, apiVersion, kind string) []byte {
	t.Helper()
	u := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: []byte{0x0a, 0x00}}
	b, err := u.Marshal()
	if err != nil {
		t.Fatalf("marshal envelope: %v", err)
	}
	return append([]byte("k8s\x00"), b...)
}
