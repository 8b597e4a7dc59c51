package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// writeFile writes data to name in dir and returns the path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubeconfigFor writes a kubeconfig of server without credentials; its name is the server's.
func kubeconfigFor(t *testing.T, dir, server string) string {
	return writeFile(t, dir, url.PathEscape(server)+".kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: %q}}]
users: [{name: x, user: {}}]
contexts: [{name: x, context: {cluster: x, user: x}}]
current-context: x
`, server))
}

// selfSigned writes a certificate for localhost and its key, and returns their paths.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeFile(t, dir, "tls.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeFile(t, dir, "tls.key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	return certFile, keyFile
}

func TestComplete(t *testing.T) {
	dir := t.TempDir()
	kc := kubeconfigFor(t, dir, "http://127.0.0.1:1")
	cert, key := selfSigned(t, dir)
	badRules := writeFile(t, dir, "bad-rules.yaml", "groups: []\n")
	noCA := writeFile(t, dir, "no-ca.crt", "not a certificate\n")
	noHost := kubeconfigFor(t, dir, "http://")
	webhook := func(o *Options) { o.WebhookListen, o.WebhookCert, o.WebhookKey = ":0", cert, key }
	for _, c := range []struct {
		name      string
		set       func(o *Options)
		env       map[string]string
		wantErr   string
		listeners []string
	}{
		{name: "defaults", listeners: []string{"api", "metrics", "health"}},
		{name: "every listener", set: webhook, listeners: []string{"api", "webhook", "metrics", "health"}},
		{name: "only the api", set: func(o *Options) { o.MetricsListen, o.HealthListen = "", "" }, listeners: []string{"api"}},
		{name: "KUBECONFIG when --kubeconfig is empty", set: func(o *Options) { o.Kubeconfig = "" },
			env: map[string]string{"KUBECONFIG": kc}, listeners: []string{"api", "metrics", "health"}},
		{name: "webhook on localhost", set: func(o *Options) { webhook(o); o.WebhookTarget = "https://localhost:9443" },
			listeners: []string{"api", "webhook", "metrics", "health"}},
		{name: "webhook target with a CA", set: func(o *Options) {
			webhook(o)
			o.WebhookTarget, o.WebhookTargetCA = "https://virt-api.example:9443", cert
		}, listeners: []string{"api", "webhook", "metrics", "health"}},

		{name: "missing rules file", set: func(o *Options) { o.Rules = filepath.Join(dir, "nope.yaml") },
			wantErr: "--rules: open "},
		{name: "invalid rules", set: func(o *Options) { o.Rules = badRules }, wantErr: "--rules " + badRules + ": rules: invalid: "},
		{name: "missing kubeconfig", set: func(o *Options) { o.Kubeconfig = filepath.Join(dir, "nope") },
			wantErr: "upstream apiserver: "},
		{name: "neither kubeconfig nor cluster", set: func(o *Options) { o.Kubeconfig = "" },
			env:     map[string]string{"KUBECONFIG": "", "KUBERNETES_SERVICE_HOST": "", "KUBERNETES_SERVICE_PORT": ""},
			wantErr: "upstream apiserver: unable to load in-cluster configuration"},
		{name: "upstream without host", set: func(o *Options) { o.Kubeconfig = noHost },
			wantErr: `upstream apiserver address "http://": no host`},
		{name: "missing webhook certificate", set: func(o *Options) { webhook(o); o.WebhookCert = filepath.Join(dir, "nope.crt") },
			wantErr: "webhook certificate: "},
		{name: "bad webhook target", set: func(o *Options) { webhook(o); o.WebhookTarget = "https://[::1" },
			wantErr: "--webhook-target: parse "},
		{name: "webhook target off loopback", set: func(o *Options) { webhook(o); o.WebhookTarget = "https://10.0.0.1:9443" },
			wantErr: "--webhook-target https://10.0.0.1:9443 is not on loopback: set --webhook-target-ca"},
		{name: "webhook target named off loopback", set: func(o *Options) { webhook(o); o.WebhookTarget = "https://virt-api:9443" },
			wantErr: "is not on loopback"},
		{name: "missing webhook target CA", set: func(o *Options) { webhook(o); o.WebhookTargetCA = filepath.Join(dir, "nope.crt") },
			wantErr: "--webhook-target-ca: open "},
		{name: "webhook target CA without a certificate", set: func(o *Options) { webhook(o); o.WebhookTargetCA = noCA },
			wantErr: "--webhook-target-ca " + noCA + ": no certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			o := NewOptions()
			o.Kubeconfig = kc
			if c.set != nil {
				c.set(o)
			}
			p, err := o.Complete(discard)
			if failed(t, err, c.wantErr) {
				return
			}
			var names []string
			for _, s := range p.servers {
				names = append(names, s.name)
				if (s.tls != nil) != (s.name == "webhook") {
					t.Errorf("%s listener: TLS %v", s.name, s.tls != nil)
				}
			}
			if strings.Join(names, ",") != strings.Join(c.listeners, ",") {
				t.Errorf("listeners %v, want %v", names, c.listeners)
			}
		})
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The proxy serves its listeners until its context ends, then shuts down cleanly.
func TestRun(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","message":"upstream %s"}`, r.URL.Path)
	}))
	defer upstream.Close()
	o := NewOptions()
	o.Kubeconfig = kubeconfigFor(t, t.TempDir(), upstream.URL)
	o.APIListen, o.MetricsListen, o.HealthListen = freeAddr(t), freeAddr(t), freeAddr(t)
	p, err := o.Complete(discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("tcp", o.HealthListen); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the health listener does not open")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		url, want string
	}{
		{"http://" + o.HealthListen + "/healthz", "ok"},
		{"http://" + o.HealthListen + "/readyz", "ok"},
		{"http://" + o.APIListen + "/api", "upstream /api"},
		{"http://" + o.MetricsListen + "/metrics", "go_goroutines"},
	} {
		if code, body := get(t, c.url); code != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %q, want 200 with %q", c.url, code, body, c.want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run does not return after its context ended")
	}
}

// A listener that cannot open fails Run.
func TestRunListenerInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := NewOptions()
	o.Kubeconfig = kubeconfigFor(t, t.TempDir(), "http://127.0.0.1:1")
	o.APIListen, o.MetricsListen, o.HealthListen = ln.Addr().String(), "", ""
	p, err := o.Complete(discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "api listener: ") {
		t.Fatalf("Run: %v, want an api listener error", err)
	}
}

func TestReadyz(t *testing.T) {
	for _, c := range []struct {
		name     string
		upstream http.HandlerFunc // nil: no upstream answers
		code     int
		body     string
	}{
		{"ready", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz" {
				http.NotFound(w, r)
			}
		}, http.StatusOK, "ok"},
		{"upstream not ready", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "etcd", http.StatusInternalServerError)
		}, http.StatusServiceUnavailable, "upstream readyz: 500 Internal Server Error"},
		{"no upstream", nil, http.StatusServiceUnavailable, "upstream: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := &url.URL{Scheme: "http", Host: freeAddr(t)}
			if c.upstream != nil {
				s := httptest.NewServer(c.upstream)
				defer s.Close()
				u, _ = url.Parse(s.URL)
			}
			rec := httptest.NewRecorder()
			health(u, http.DefaultTransport, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != c.code || !strings.HasPrefix(rec.Body.String(), c.body) {
				t.Errorf("readyz: %d %q, want %d %q", rec.Code, rec.Body.String(), c.code, c.body)
			}
		})
	}
}
