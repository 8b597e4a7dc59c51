package transport

import (
	"mime"
	"net/http"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
)

// TestOpenAPIV2: /openapi/v2 is fetched as JSON and restored, and encoded as protobuf again for a
// client that asks for it (client-go's discovery does); a stock KubeVirt's schemas are dropped.
func TestOpenAPIV2(t *testing.T) {
	doc := c(`{"swagger":"2.0","info":{"title":"Kubernetes","version":"v1.37.2"},"paths":{` +
		`"/apis/IG/v1/namespaces/{namespace}/internalvirtualizationvirtualmachines":{"get":{"responses":{"200":{"description":"OK"}},"x-kubernetes-group-version-kind":{"group":"IG","kind":"InternalVirtualizationVirtualMachine","version":"v1"}}},` +
		`"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines":{"get":{"responses":{"200":{"description":"OK"}},"x-kubernetes-group-version-kind":{"group":"kubevirt.io","kind":"VirtualMachine","version":"v1"}}}},` +
		`"definitions":{"io.deckhouse.virtualization.internal.v1.InternalVirtualizationVirtualMachine":{"type":"object","x-kubernetes-group-version-kind":[{"group":"IG","kind":"InternalVirtualizationVirtualMachine","version":"v1"}]},` +
		`"io.kubevirt.v1.VirtualMachine":{"type":"object","x-kubernetes-group-version-kind":[{"group":"kubevirt.io","kind":"VirtualMachine","version":"v1"}]}}}`)
	for _, tc := range []struct{ name, accept, wantCT string }{
		{"json", "application/json", "application/json"},
		{"protobuf", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json", openAPIV2ProtobufType},
		{"protobuf, new spelling", openAPIV2ProtobufType, openAPIV2ProtobufType},
		{"protobuf less wanted", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf; q=0.5, application/json", "application/json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				if req.Header.Get("Accept") != "application/json" {
					return response(req, http.StatusNotAcceptable, "text/plain", "JSON only in this test")
				}
				return response(req, http.StatusOK, "application/json", doc)
			}}
			rt, _ := newEngine(up)
			req := newRequest(t, "GET", "/openapi/v2", "", nil)
			req.Header.Set("Accept", tc.accept)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.wantCT {
				t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			text := string(body)
			if _, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil {
				t.Errorf("client-go cannot parse Content-Type %q: %v", resp.Header.Get("Content-Type"), err)
			}
			if tc.wantCT == openAPIV2ProtobufType {
				var d openapiv2.Document
				if err := proto.Unmarshal(body, &d); err != nil {
					t.Fatalf("not a protobuf OpenAPI v2 document: %v", err)
				}
				text = d.String()
			}
			for _, want := range []string{"/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines", "io.deckhouse.virtualization.internal.v1.InternalVirtualizationVirtualMachine"} {
				if !strings.Contains(text, want) {
					t.Errorf("document lacks %s", want)
				}
			}
			for _, leak := range []string{IG + "/", "internalvirtualizationvirtualmachines", "io.kubevirt.v1.VirtualMachine", `"InternalVirtualizationVirtualMachine"`} {
				if strings.Contains(text, leak) {
					t.Errorf("document still has %s", leak)
				}
			}
		})
	}
}
