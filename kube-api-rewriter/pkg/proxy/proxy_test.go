package proxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kube-api-rewriter/pkg/transport"
)

const (
	IG = "internal.virtualization.deckhouse.io"
	IK = "kubevirt.internal.virtualization.deckhouse.io"
)

var (
	rw       = rewrite.New(rules.Default())
	quietLog = slog.New(slog.DiscardHandler)
)

// withCredentials stands for the upstream credentials rest.TransportFor adds.
type withCredentials struct{ next http.RoundTripper }

func (c withCredentials) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer sidecar-token")
	return c.next.RoundTrip(r)
}

// newAPI serves NewAPI in front of upstream, with the engine and credentials as in the binary.
func newAPI(t *testing.T, upstream string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	engine := transport.New(withCredentials{&http.Transport{}}, transport.Options{Rewriter: rw, Metrics: metrics.New(), Listener: "api"})
	srv := httptest.NewServer(NewAPI(u, engine, quietLog))
	t.Cleanup(srv.Close)
	return srv
}

// TestAPIUpgrade: exec, port-forward and the VMI console upgrade the connection; the proxy must
// hand over the raw bytes both ways.
func TestAPIUpgrade(t *testing.T) {
	for _, tc := range []struct{ name, path, protocol string }{
		{"exec over SPDY", "/api/v1/namespaces/ns/pods/virt-launcher-vm/exec?command=sh&stdin=true", "SPDY/3.1"},
		{"port-forward over websocket", "/api/v1/namespaces/ns/pods/virt-launcher-vm/portforward?ports=22", "websocket"},
		{"vmi console", "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachineinstances/vm/console", "websocket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotPath, gotAuth string
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotAuth = r.URL.RequestURI(), r.Header.Get("Authorization")
				if !strings.EqualFold(r.Header.Get("Upgrade"), tc.protocol) {
					http.Error(w, "no upgrade", http.StatusBadRequest)
					return
				}
				conn, brw, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				defer conn.Close()
				fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", tc.protocol)
				brw.Flush()
				// Echo until the client hangs up, as a shell would answer keystrokes.
				buf := make([]byte, 256)
				for {
					n, err := brw.Read(buf)
					if n > 0 {
						conn.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}))
			defer up.Close()
			api := newAPI(t, up.URL)

			conn, err := net.Dial("tcp", strings.TrimPrefix(api.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: %s\r\nAuthorization: Bearer component-token\r\n\r\n", tc.path, tc.protocol)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("read upgrade response: %v", err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %d, want 101", resp.StatusCode)
			}
			for _, msg := range []string{"ls -l\n", "\x00\x01binary\xff", strings.Repeat("x", 200)} {
				if _, err := io.WriteString(conn, msg); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(br, got); err != nil {
					t.Fatalf("echo of %q: %v", msg, err)
				}
				if string(got) != msg {
					t.Errorf("echo %q, want %q", got, msg)
				}
			}
			if gotPath != tc.path {
				t.Errorf("upstream saw %s, want %s", gotPath, tc.path)
			}
			if gotAuth != "Bearer sidecar-token" {
				t.Errorf("upstream Authorization %q: the upgrade must carry the sidecar's credentials only", gotAuth)
			}
		})
	}
}

// TestAPIForwarding: the component's credentials never reach the cluster (the sidecar's do), the
// request is renamed, and the answer restored.
func TestAPIForwarding(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Values("Authorization")
		mu.Unlock()
		if r.URL.Path != "/apis/"+IG+"/v1/namespaces/ns/internalvirtualizationvirtualmachines/vm" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"apiVersion":"`+IG+`/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"vm","labels":{"`+IK+`/x":"1"}}}`)
	}))
	defer up.Close()
	api := newAPI(t, up.URL)
	req, _ := http.NewRequest("GET", api.URL+"/apis/kubevirt.io/v1/namespaces/ns/virtualmachines/vm", nil)
	req.Header.Set("Authorization", "Bearer component-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	want := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm","labels":{"kubevirt.io/x":"1"}}}`
	if string(body) != want {
		t.Errorf("body %s, want %s", body, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(auth, []string{"Bearer sidecar-token"}) {
		t.Errorf("upstream Authorization %q, want only the sidecar's", auth)
	}
}

// TestAPIUpstreamDown: a failing apiserver is answered with a Status clients understand.
func TestAPIUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more
	api := newAPI(t, "http://"+addr)
	for _, p := range []string{"/apis/kubevirt.io/v1/virtualmachines", "/api/v1/namespaces/ns/pods/p/log", "/healthz"} {
		resp, err := http.Get(api.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var s struct {
			Kind, Status, Message string
			Code                  int
		}
		if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" || s.Status != "Failure" || s.Code != http.StatusBadGateway || !strings.Contains(s.Message, "upstream") {
			t.Errorf("%s: not a 502 Status: %s (%v)", p, body, err)
		}
	}
}

const (
	vmRenamed  = `{"apiVersion":"` + IG + `/v1","kind":"InternalVirtualizationVirtualMachine","metadata":{"name":"vm","namespace":"ns","labels":{"` + IK + `/created-by":"u"}},"spec":{"running":true}}`
	vmOriginal = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns","labels":{"kubevirt.io/created-by":"u"}},"spec":{"running":true}}`
)

// reviewFor is the AdmissionReview the apiserver sends for a renamed VM.
func reviewFor(object string) string {
	return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"0b1c","kind":{"group":"` + IG + `","version":"v1","kind":"InternalVirtualizationVirtualMachine"},` +
		`"resource":{"group":"` + IG + `","version":"v1","resource":"internalvirtualizationvirtualmachines"},"name":"vm","namespace":"ns","operation":"CREATE",` +
		`"userInfo":{"username":"u"},"object":` + object + `,"oldObject":null,"dryRun":false}}`
}

type review struct {
	Request *struct {
		UID      string
		Kind     struct{ Group, Version, Kind string }
		Resource struct {
			Group, Version, Resource string
		}
		Object json.RawMessage
	} `json:"request"`
	Response *struct {
		UID       string
		Allowed   bool
		PatchType string
		Patch     []byte
		Status    *struct {
			Code    int
			Message string
		}
	} `json:"response"`
}

// TestWebhook: the component's webhook server sees kubevirt.io objects; its answer goes back to
// the apiserver with the patch renamed and a denial message untouched.
func TestWebhook(t *testing.T) {
	denial := `admission webhook "virtualmachine-validator.kubevirt.io" denied the request: spec.template.spec.domain.devices.disks[0] kubevirt.io/x "a" not found`
	for _, tc := range []struct {
		name      string
		path      string
		answer    func(uid string) string // the component's webhook server
		wantPatch string                  // JSON, cluster view; empty when no patch
		wantDeny  string
	}{
		{name: "mutating", path: "/virtualmachines-mutate",
			answer: func(uid string) string {
				p := `[{"op":"add","path":"/metadata/labels/kubevirt.io~1mutated","value":"true"},{"op":"add","path":"/metadata/finalizers","value":["kubevirt.io/virtualMachineControllerFinalize"]},{"op":"replace","path":"/spec/running","value":false}]`
				return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"` + uid + `","allowed":true,"patchType":"JSONPatch","patch":"` + base64.StdEncoding.EncodeToString([]byte(p)) + `"}}`
			},
			wantPatch: `[{"op":"add","path":"/metadata/labels/` + IK + `~1mutated","value":"true"},{"op":"add","path":"/metadata/finalizers","value":["` + IK + `/virtualMachineControllerFinalize"]},{"op":"replace","path":"/spec/running","value":false}]`},
		{name: "validating denial", path: "/virtualmachines-validate",
			answer: func(uid string) string {
				return `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"` + uid + `","allowed":false,"status":{"code":422,"message":` + mustJSON(denial) + `}}}`
			},
			wantDeny: denial},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seenPath string
			var seen review
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seenPath = r.URL.Path
				if err := json.NewDecoder(r.Body).Decode(&seen); err != nil || seen.Request == nil {
					http.Error(w, "bad review", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tc.answer(seen.Request.UID))
			}))
			defer server.Close()
			target, _ := url.Parse(server.URL)
			m := metrics.New()
			wh := &Webhook{Rewriter: rw, Target: target, Client: server.Client(), Metrics: m, Log: quietLog}
			rec := httptest.NewRecorder()
			wh.ServeHTTP(rec, httptest.NewRequest("POST", tc.path+"?timeout=10s", strings.NewReader(reviewFor(vmRenamed))))

			if seenPath != tc.path {
				t.Errorf("webhook server path %s, want %s", seenPath, tc.path)
			}
			if seen.Request == nil {
				t.Fatalf("webhook server got no review; proxy answered %d %s", rec.Code, rec.Body)
			}
			if k := seen.Request.Kind; k.Group != "kubevirt.io" || k.Kind != "VirtualMachine" || k.Version != "v1" {
				t.Errorf("webhook server saw kind %+v", k)
			}
			if r := seen.Request.Resource; r.Group != "kubevirt.io" || r.Resource != "virtualmachines" {
				t.Errorf("webhook server saw resource %+v", r)
			}
			if !jsonEq(seen.Request.Object, []byte(vmOriginal)) {
				t.Errorf("webhook server saw object %s", seen.Request.Object)
			}
			if rec.Code != http.StatusOK {
				t.Fatalf("proxy answered %d: %s", rec.Code, rec.Body)
			}
			var out review
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("answer %s: %v", rec.Body, err)
			}
			if out.Response.UID != "0b1c" {
				t.Errorf("uid %q", out.Response.UID)
			}
			if tc.wantPatch != "" && !jsonEq(out.Response.Patch, []byte(tc.wantPatch)) {
				t.Errorf("patch\n got %s\nwant %s", out.Response.Patch, tc.wantPatch)
			}
			if tc.wantDeny != "" {
				if out.Response.Allowed || out.Response.Status == nil || out.Response.Status.Message != tc.wantDeny || out.Response.Status.Code != 422 {
					t.Errorf("denial changed: %+v", out.Response)
				}
			}
			if v := testutil.ToFloat64(m.Requests.WithLabelValues("webhook", "admissionreviews", "create", "200")); v != 1 {
				t.Errorf("webhook requests_total = %v", v)
			}
		})
	}
}

// TestWebhookRefusals: what is not an AdmissionReview POST is answered with a Status and never
// reaches the component's webhook server.
func TestWebhookRefusals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		body     string
		wantCode int
	}{
		{"get", "GET", "", http.StatusMethodNotAllowed},
		{"put", "PUT", reviewFor(vmRenamed), http.StatusMethodNotAllowed},
		{"oversized", "POST", reviewFor(`{"kind":"x","data":"` + strings.Repeat("a", maxReviewBytes) + `"}`), http.StatusRequestEntityTooLarge},
		{"malformed", "POST", `{"kind":"AdmissionReview","request":{"kind":`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called = true }))
			defer server.Close()
			target, _ := url.Parse(server.URL)
			wh := &Webhook{Rewriter: rw, Target: target, Client: server.Client(), Log: quietLog}
			rec := httptest.NewRecorder()
			wh.ServeHTTP(rec, httptest.NewRequest(tc.method, "/validate", strings.NewReader(tc.body)))
			if called {
				t.Error("the webhook server was called")
			}
			if rec.Code != tc.wantCode {
				t.Errorf("code %d, want %d", rec.Code, tc.wantCode)
			}
			var s struct {
				Kind string
				Code int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil || s.Kind != "Status" || s.Code != tc.wantCode {
				t.Errorf("not a Status: %.200s", rec.Body)
			}
		})
	}
}

// TestWebhookServerDown: an unreachable webhook server is a 502 Status, so the apiserver applies
// the webhook's failurePolicy with a readable reason.
func TestWebhookServerDown(t *testing.T) {
	server := httptest.NewServer(http.NotFoundHandler())
	target, _ := url.Parse(server.URL)
	server.Close()
	wh := &Webhook{Rewriter: rw, Target: target, Client: &http.Client{Timeout: 5 * time.Second}, Log: quietLog}
	rec := httptest.NewRecorder()
	wh.ServeHTTP(rec, httptest.NewRequest("POST", "/validate", strings.NewReader(reviewFor(vmRenamed))))
	if rec.Code != http.StatusBadGateway || !bytes.Contains(rec.Body.Bytes(), []byte(`"kind":"Status"`)) {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

func jsonEq(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
