package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// clusterAnswer is what the fake apiserver answers to every request: cluster-view names in every
// place the engine restores, as a document or, for a watch, as events.
func clusterAnswer(req *http.Request) *http.Response {
	if rewrite.ParseRequest(req.Method, req.URL).Verb == "watch" {
		ev := `{"type":"ADDED","object":` + c(vmJSONC) + "}\n" + `{"type":"BOOKMARK","object":{"kind":"InternalVirtualizationVirtualMachine","apiVersion":"` + IG + `/v1","metadata":{"resourceVersion":"2"}}}` + "\n"
		return unknownLength(response(req, http.StatusOK, "application/json", ev))
	}
	status := c(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"internalvirtualizationvirtualmachines.IG \"vm\" not found","reason":"NotFound","details":{"name":"vm","group":"IG","kind":"internalvirtualizationvirtualmachines","causes":[{"field":".metadata.labels.IK/x"}]},"code":404}`)
	if req.Method == http.MethodDelete {
		return response(req, http.StatusNotFound, "application/json", status)
	}
	return response(req, http.StatusOK, "application/json", c(vmJSONC))
}

// FuzzHTTPRequest feeds whole HTTP requests (method, path, query, headers, body) to the engine in
// front of a fake apiserver that records what it receives and answers in the cluster's names. The
// engine never panics; on a path it rewrites, the answer never shows an internal name (unless the
// client wrote one itself), and no request reaches the apiserver with an original group where a
// rule applies (in the path or as the body's apiVersion), unless the client asked for a preserved
// original.
func FuzzHTTPRequest(f *testing.F) {
	for _, s := range []string{
		"GET " + vmPath + "/vm HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + vmPath + "?watch=True&labelSelector=kubevirt.io%2Fx HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
		"GET /apis/kubevirt.io/v1/watch/namespaces/ns/virtualmachines HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET " + vmPath + "?watch=true HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
		"POST " + vmPath + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(vmJSON)) + "\r\n\r\n" + vmJSON,
		"POST " + vmPath + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/yaml\r\nContent-Length: 45\r\n\r\napiVersion: kubevirt.io/v1\nkind: VirtualMachine",
		"PATCH /api/v1/namespaces/ns/pods/p HTTP/1.1\r\nHost: x\r\nContent-Type: application/json-patch+json\r\nContent-Length: 86\r\n\r\n" +
			`[{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachine"}]`,
		"PATCH " + vmPath + "/vm HTTP/1.1\r\nHost: x\r\nContent-Type: application/apply-patch+yaml\r\nContent-Length: 40\r\n\r\nmetadata:\n  labels: {kubevirt.io/x: y}\n",
		"DELETE " + vmPath + "/vm HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /api/v1/namespaces/ns/events?fieldSelector=involvedObject.kind%3DVirtualMachine%2CinvolvedObject.uid%3D1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /openapi/v2 HTTP/1.1\r\nHost: x\r\nAccept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf\r\n\r\n",
		"GET /apis/virtualization.deckhouse.io/v1alpha2/virtualmachines HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil || req.URL.IsAbs() || !strings.HasPrefix(req.URL.Path, "/") {
			return
		}
		req.URL.Scheme, req.URL.Host = "http", "upstream"
		req.RequestURI = ""
		up := &stub{respond: clusterAnswer}
		rt, _ := newEngine(up)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return // the upstream failed (a body the stub could not read): the proxy answers 502
		}
		body, readErr := io.ReadAll(resp.Body)
		resp.Body.Close()
		ri := rewrite.ParseRequest(req.Method, req.URL)
		rewritten := rt.rewrites(ri) || isOpenAPI(req)
		clientWroteInternal := bytes.Contains(bytes.ToLower(raw), []byte("internal")) || bytes.Contains(raw, []byte("%"))
		if rewritten && readErr == nil && !clientWroteInternal && resp.Header.Get("Content-Encoding") == "" {
			for _, leak := range []string{IG, "InternalVirtualization", "internalvirtualization"} {
				if bytes.Contains(body, []byte(leak)) {
					t.Fatalf("answer to %s %s shows %q:\n%s", req.Method, req.URL, leak, body)
				}
			}
		}
		if bytes.Contains(raw, []byte(testRewriter.Rules().PreservedPrefix)) {
			return
		}
		rules := testRewriter.Rules()
		for _, fwd := range up.calls() {
			fri := rewrite.ParsePath(fwd.Path)
			if !rt.rewrites(fri) {
				continue
			}
			if fri.Group != "" && rules.IsOriginalGroup(fri.Group) {
				t.Fatalf("forwarded %s %s with the original group", fwd.Method, fwd.Path)
			}
			var obj struct{ APIVersion, Kind string }
			if json.Unmarshal(fwd.Body, &obj) == nil {
				g, _, _ := strings.Cut(obj.APIVersion, "/")
				if !strings.Contains(obj.APIVersion, "/") {
					g = ""
				}
				if rules.LookupKind(rewrite.Rename, g, obj.Kind) != nil {
					t.Fatalf("forwarded a body of %s %s in the original names:\n%s", obj.APIVersion, obj.Kind, fwd.Body)
				}
			}
		}
	})
}
