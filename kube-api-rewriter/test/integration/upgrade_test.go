package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/d8virt/hack/pkg/testenv"
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

	apiServices := env.Dynamic.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.subresources.rewritertest.d8v.io"},
		"spec": map[string]any{
			"group": "subresources.rewritertest.d8v.io", "version": "v1",
			"service":              map[string]any{"namespace": ns, "name": "virt-api", "port": int64(443)},
			"caBundle":             base64.StdEncoding.EncodeToString(caPEM),
			"groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
		},
	}}
	if _, err := apiServices.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apiServices.Delete(context.Background(), svc.GetName(), metav1.DeleteOptions{}) })
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := apiServices.Get(ctx, svc.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Available" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("APIService not available: %v", err)
	}

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
