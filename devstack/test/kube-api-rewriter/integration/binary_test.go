package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d8virt/devstack/testenv"
)

// buildRewriter compiles the sidecar binary once per test.
func buildRewriter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kube-api-rewriter")
	out, err := exec.Command("go", "build", "-o", bin, "../../../../kube-api-rewriter/cmd/kube-api-rewriter").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
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

func httpGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func waitHTTP(t *testing.T, url string, want int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, err := httpGet(url)
		if err == nil && code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: code %d, err %v, body %q; want %d", url, code, err, body, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The binary serves the api listener, exports metrics, reports real readiness and stops cleanly on
// SIGTERM. Flags come from the environment as documented.
func TestSidecarBinary(t *testing.T) {
	fx := setup(t)
	bin := buildRewriter(t)
	api, metricsAddr, healthAddr := freeAddr(t), freeAddr(t), freeAddr(t)

	cmd := exec.Command(bin, "--kubeconfig", fx.env.Kubeconfig, "--log-format", "text")
	cmd.Env = append(os.Environ(),
		"KUBE_API_REWRITER_API_LISTEN="+api,
		"KUBE_API_REWRITER_METRICS_LISTEN="+metricsAddr,
		"KUBE_API_REWRITER_HEALTH_LISTEN="+healthAddr,
		"KUBE_API_REWRITER_LOG_LEVEL=debug",
	)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case logs <- sc.Text():
			default:
			}
		}
		close(logs)
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	waitHTTP(t, "http://"+healthAddr+"/readyz", http.StatusOK)
	if _, body, _ := httpGet("http://" + healthAddr + "/healthz"); body != "ok" {
		t.Errorf("healthz: %q", body)
	}
	ns := fx.env.Namespace(t)
	c := mode{name: "binary", config: restConfig("http://" + api)}.typed(t)
	if err := c.Create(testenv.Context(t), newVM(ns, "via-binary")); err != nil {
		t.Fatalf("create through the binary: %v", err)
	}
	metrics := waitHTTP(t, "http://"+metricsAddr+"/metrics", http.StatusOK)
	for _, want := range []string{
		`kube_api_rewriter_requests_total{code="201",listener="api",resource="virtualmachines.kubevirt.io",verb="create"} 1`,
		`kube_api_rewriter_rewrites_total{direction="rename",payload="object"}`,
		`kube_api_rewriter_request_duration_seconds_bucket`,
		`kube_api_rewriter_bytes_total{direction="in",listener="api"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20s after SIGTERM")
	}
	var all []string
	for l := range logs {
		all = append(all, l)
	}
	text := strings.Join(all, "\n")
	if !strings.Contains(text, "renamed request body") || !strings.Contains(text, `kubevirt.io/vm`) {
		t.Errorf("debug log has no structural diff of the request body:\n%s", text)
	}
	if !strings.Contains(text, "shutting down") {
		t.Errorf("no shutdown log line:\n%s", text)
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// Readiness follows the upstream: with no apiserver behind it, the sidecar is alive but not ready.
func TestSidecarNotReadyWithoutUpstream(t *testing.T) {
	bin := buildRewriter(t)
	dead := freeAddr(t)
	kc := filepath.Join(t.TempDir(), "dead.kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "http://%s"}}]
users: [{name: x, user: {}}]
contexts: [{name: x, context: {cluster: x, user: x}}]
current-context: x
`, dead)), 0o600); err != nil {
		t.Fatal(err)
	}
	health := freeAddr(t)
	cmd := exec.Command(bin, "--kubeconfig", kc, "--api-listen", freeAddr(t), "--metrics-listen", "", "--health-listen", health)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(t, "http://"+health+"/healthz", http.StatusOK)
	waitHTTP(t, "http://"+health+"/readyz", http.StatusServiceUnavailable)
}
