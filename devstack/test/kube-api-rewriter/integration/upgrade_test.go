package integration

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/testenv"
)

// consoleServer stands in for the core's virt-api: it serves a subresources group and upgrades
// console requests, then echoes what it reads in upper case, as a guest's shell might.
func consoleServer() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/subresources.rewritertest.d8v.io/v1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "subresources.rewritertest.d8v.io/v1",
			"resources": []any{map[string]any{"name": "virtualmachineinstances/console", "namespaced": true, "kind": "VirtualMachineInstance", "verbs": []string{"get"}}},
		})
	})
	mux.HandleFunc("/apis/subresources.rewritertest.d8v.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/console", func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "console needs a websocket", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: plain.kubevirt.io\r\nX-Remote-User-Seen: %s\r\n\r\n", r.Header.Get("X-Remote-User"))
		_ = rw.Flush()
		buf := make([]byte, 1024)
		for {
			n, err := rw.Read(buf)
			if n > 0 {
				_, _ = conn.Write(bytes.ToUpper(buf[:n]))
			}
			if err != nil {
				return
			}
		}
	})
	return mux
}

// A console stream goes from the component through the sidecar and the apiserver's aggregation
// layer to the core's virt-api and back, as `virtctl console` does, byte for byte. The group is a
// test group, not subresources.kubevirt.io, because kubevirt-core's tests register the real one
// in the same cluster at the same time.
func TestConsoleUpgradeThroughSidecarAndAggregator(t *testing.T) {
	fx := setup(t)
	env := fx.env
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	host := env.Host(t, "virt-api")

	auth, err := env.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM([]byte(auth.Data["requestheader-client-ca-file"]))
	cert, caPEM := testenv.ServingCert(t, []string{"virt-api." + ns + ".svc"}, nil)
	ln, err := host.Listen("tcp", net.JoinHostPort(host.IP.String(), "8443"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: consoleServer(), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert,
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	env.ExposeService(t, ns, "virt-api", host.IP.String(), 8443)

	env.RegisterAPIService(t, "subresources.rewritertest.d8v.io", "v1", ns, "virt-api", caPEM)

	proxyURL, _ := url.Parse(fx.modes[0].config.Host)
	conn, err := net.DialTimeout("tcp", proxyURL.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET /apis/subresources.rewritertest.d8v.io/v1/namespaces/%s/virtualmachineinstances/demo/console HTTP/1.1\r\n"+
		"Host: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: plain.kubevirt.io\r\n\r\n", ns, proxyURL.Host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("read upgrade response: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade answered %s: %s", resp.Status, body)
	}
	if resp.Header.Get("Sec-WebSocket-Protocol") != "plain.kubevirt.io" || resp.Header.Get("X-Remote-User-Seen") != "kubernetes-admin" {
		t.Errorf("upgrade headers %v", resp.Header)
	}
	for _, line := range []string{"echo hello\n", "uname -a\n"} {
		if _, err := io.WriteString(conn, line); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(line))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("read echo: %v", err)
		}
		if string(got) != strings.ToUpper(line) {
			t.Errorf("console echoed %q, want %q", got, strings.ToUpper(line))
		}
	}
}
