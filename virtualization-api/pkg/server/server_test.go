package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"
	clocktesting "k8s.io/utils/clock/testing"

	virtv1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-api/pkg/core"
	"github.com/d8virt/virtualization-api/pkg/metrics"
	"github.com/d8virt/virtualization-api/pkg/registry"
	"github.com/d8virt/virtualization-api/pkg/relay"
	"github.com/d8virt/virtualization-api/pkg/sessions"
)

type fakeVMs map[string]*virtv1alpha2.VirtualMachine

func (f fakeVMs) Get(_ context.Context, namespace, name string) (*virtv1alpha2.VirtualMachine, error) {
	if vm, ok := f[namespace+"/"+name]; ok {
		return vm, nil
	}
	return nil, apierrors.NewNotFound(virtv1alpha2.Resource("virtualmachines"), name)
}

// fakeCore echoes streams (from guest, an echo WebSocket server) and records calls.
type fakeCore struct {
	guest string
	mu    sync.Mutex
	calls []string
}

func (f *fakeCore) Stream(ctx context.Context, namespace, name, path string) (*websocket.Conn, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "stream "+namespace+"/"+name+"/"+path)
	f.mu.Unlock()
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(f.guest, "http"), nil)
	return ws, err
}

func (f *fakeCore) Call(_ context.Context, method, namespace, name, path string, body io.Reader) (int, string, []byte, error) {
	b, _ := io.ReadAll(body)
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s %s/%s/%s %s", method, namespace, name, path, b))
	f.mu.Unlock()
	return http.StatusAccepted, "text/plain", []byte("core says ok"), nil
}

func echo() *httptest.Server {
	up := websocket.Upgrader{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if err := ws.WriteMessage(typ, msg); err != nil {
				return
			}
		}
	}))
}

func vm(ns, name string, phase virtv1alpha2.MachinePhase) *virtv1alpha2.VirtualMachine {
	v := &virtv1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	v.Status.Phase = phase
	return v
}

// serve runs the server's handler with the user of the X-Test-User header and every request
// allowed (the cluster's authorization is the e2e test's).
func serve(t *testing.T, vms fakeVMs, c *fakeCore, reg *prometheus.Registry) *httptest.Server {
	t.Helper()
	cfg := NewConfig()
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.37", "", "")
	cfg.LoopbackClientConfig = &rest.Config{}
	cfg.ExternalAddress = "127.0.0.1:443"
	cfg.Authentication.Authenticator = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: r.Header.Get("X-Test-User")}}, true, nil
	})
	cfg.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	srv, err := New(cfg.Complete(), registry.Deps{
		VMs:  vms,
		Core: c,
		Sessions: sessions.New(sessions.Config{
			Leases: fake.NewClientset().CoordinationV1().Leases("d8-virtualization"), Identity: "virtualization-api-test",
			Clock: clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), Duration: 30 * time.Second, Resource: virtv1alpha2.Resource("virtualmachines"),
		}),
		Metrics: metrics.New(reg),
		Relay:   relay.Config{PingInterval: time.Second, CloseGrace: time.Second},
		Log:     func(string, ...any) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.PrepareRun()
	ts := httptest.NewServer(srv.Handler)
	t.Cleanup(ts.Close)
	return ts
}

const base = "/apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/ns/virtualmachines/"

func TestDiscovery(t *testing.T) {
	ts := serve(t, fakeVMs{}, &fakeCore{}, prometheus.NewRegistry())
	resp, err := http.Get(ts.URL + "/apis/subresources.virtualization.deckhouse.io/v1alpha2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list metav1.APIResourceList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range list.APIResources {
		got[r.Name] = strings.Join(r.Verbs, ",")
		if !r.Namespaced {
			t.Errorf("%s is not namespaced", r.Name)
		}
	}
	want := map[string]string{
		"virtualmachines": "get", "virtualmachines/console": "get", "virtualmachines/vnc": "get", "virtualmachines/portforward": "get",
		"virtualmachines/addvolume": "update", "virtualmachines/removevolume": "update", "virtualmachines/freeze": "update", "virtualmachines/unfreeze": "update",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("discovery:\n got %v\nwant %v", got, want)
	}
	for _, path := range []string{"/openapi/v2", "/openapi/v3/apis/subresources.virtualization.deckhouse.io/v1alpha2"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "virtualmachines/{name}/console") {
			t.Errorf("%s: %d %.300s", path, resp.StatusCode, body)
		}
	}
}

func TestRouting(t *testing.T) {
	g := echo()
	defer g.Close()
	vms := fakeVMs{"ns/up": vm("ns", "up", virtv1alpha2.MachineRunning), "ns/off": vm("ns", "off", virtv1alpha2.MachineStopped)}
	c := &fakeCore{guest: g.URL}
	reg := prometheus.NewRegistry()
	ts := serve(t, vms, c, reg)

	for _, tc := range []struct {
		name, method, path string
		code               int
		body               string // a part of the answer
	}{
		{"the VM itself", http.MethodGet, "up", 200, `"kind":"VirtualMachine","apiVersion":"subresources.virtualization.deckhouse.io/v1alpha2","metadata":{"name":"up","namespace":"ns"`},
		{"a missing VM itself", http.MethodGet, "missing", 404, `virtualmachines.virtualization.deckhouse.io \"missing\" not found`},
		{"missing VM", http.MethodGet, "missing/console", 404, `virtualmachines.virtualization.deckhouse.io \"missing\" not found`},
		{"stopped VM", http.MethodPut, "off/freeze", 409, `VirtualMachine is not Running: freeze needs the phase Running, the phase is Stopped`},
		{"freeze passed on", http.MethodPut, "up/freeze", 202, "core says ok"},
		{"addvolume passed on", http.MethodPut, "up/addvolume", 202, "core says ok"},
		{"freeze is not GET", http.MethodGet, "up/freeze", 405, ""},
		{"probe, nobody", http.MethodGet, "up/console", 200, `"kind":"VirtualMachineSession","apiVersion":"subresources.virtualization.deckhouse.io/v1alpha2","held":false`},
		{"portforward without upgrade", http.MethodGet, "up/portforward/22", 400, "portforward is a WebSocket stream"},
		{"portforward bad port", http.MethodGet, "up/portforward/99999", 400, `portforward: port \"99999\" is not a number from 1 to 65535`},
		{"portforward bad protocol", http.MethodGet, "up/portforward/22/sctp", 400, `portforward: protocol \"sctp\" is not tcp or udp`},
		{"unknown subresource", http.MethodGet, "up/migrate", 404, ""},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+base+tc.path, strings.NewReader(`{"x":1}`))
		req.Header.Set("X-Test-User", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.body) {
			t.Errorf("%s: %d %s\nwant %d with %s", tc.name, resp.StatusCode, body, tc.code, tc.body)
		}
	}
	c.mu.Lock()
	if got := strings.Join(c.calls, "; "); got != `PUT ns/up/freeze {"x":1}; PUT ns/up/addvolume {"x":1}` {
		t.Errorf("core calls: %s", got)
	}
	c.calls = nil
	c.mu.Unlock()

	// A console session; a second one is refused naming the holder; the probe shows it.
	wsURL := "ws" + strings.TrimPrefix(ts.URL, "http") + base
	d := websocket.Dialer{Subprotocols: []string{core.PlainSubprotocol}}
	h := http.Header{"X-Test-User": {"alice"}, "User-Agent": {"test-client"}}
	first, resp, err := d.Dial(wsURL+"up/console", h)
	if err != nil {
		t.Fatalf("console: %v %v", err, resp)
	}
	if first.Subprotocol() != core.PlainSubprotocol {
		t.Errorf("subprotocol %q", first.Subprotocol())
	}
	if err := first.WriteMessage(websocket.BinaryMessage, []byte("ls\n")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := first.ReadMessage(); err != nil || string(msg) != "ls\n" {
		t.Fatalf("echo: %q %v", msg, err)
	}
	_, resp, err = d.Dial(wsURL+"up/console", http.Header{"X-Test-User": {"bob"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusConflict {
		t.Fatalf("second console: %v %v", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `the console of the VirtualMachine is in use by \"alice\" (client \"test-client\") since 2026-12-01T10:00:00Z`) {
		t.Errorf("second console: %s", body)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+base+"up/console", nil)
	req.Header.Set("X-Test-User", "bob")
	presp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pbody, _ := io.ReadAll(presp.Body)
	presp.Body.Close()
	if !strings.Contains(string(pbody), `"held":true,"holder":"alice","client":"test-client","startTime":"2026-12-01T10:00:00Z"`) {
		t.Errorf("probe: %s", pbody)
	}
	// VNC is another slot; portforward reaches the port's path.
	vnc, _, err := d.Dial(wsURL+"up/vnc", http.Header{"X-Test-User": {"bob"}})
	if err != nil {
		t.Fatalf("vnc while the console is open: %v", err)
	}
	pf, _, err := d.Dial(wsURL+"up/portforward/22", http.Header{"X-Test-User": {"bob"}})
	if err != nil {
		t.Fatalf("portforward: %v", err)
	}
	for _, sub := range []string{"console", "vnc", "portforward"} {
		// The server counts a stream just after the upgrade the client saw.
		want := fmt.Sprintf(`d8_virtualization_api_open_streams{subresource=%q} 1`, sub)
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(gather(t, reg), want); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("metrics lack %s", want)
				break
			}
		}
	}
	for _, ws := range []*websocket.Conn{first, vnc, pf} {
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		_, _, err := ws.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("close: %v", err)
		}
		ws.Close()
	}
	// Released: a new console opens.
	deadline := time.Now().Add(5 * time.Second)
	for {
		again, _, err := d.Dial(wsURL+"up/console", http.Header{"X-Test-User": {"bob"}})
		if err == nil {
			again.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("console after the first closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.mu.Lock()
	if got := strings.Join(c.calls, "; "); !strings.HasPrefix(got, "stream ns/up/console; stream ns/up/vnc; stream ns/up/portforward/22/tcp") {
		t.Errorf("core streams: %s", got)
	}
	c.mu.Unlock()
	for _, want := range []string{
		`d8_virtualization_api_requests_total{code="101",subresource="console",verb="get"}`,
		`d8_virtualization_api_requests_total{code="409",subresource="console",verb="get"}`,
		`d8_virtualization_api_requests_total{code="404",subresource="console",verb="get"}`,
		`d8_virtualization_api_requests_total{code="202",subresource="freeze",verb="update"}`,
		`d8_virtualization_api_streamed_bytes_total{direction="to_guest",subresource="console"} 3`,
		`d8_virtualization_api_streamed_bytes_total{direction="to_client",subresource="console"} 3`,
	} {
		if !strings.Contains(gather(t, reg), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, "%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), v)
		}
	}
	return b.String()
}
