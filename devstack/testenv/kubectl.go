package testenv

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d8virt/devstack/controlplane"
)

// Kubectl runs the stack's kubectl with its own discovery cache and fails the test on error,
// showing the output.
func Kubectl(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := KubectlInput(t, kubeconfig, "", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// KubectlInput runs kubectl with stdin and returns its combined output and error, for tests that
// expect it to fail.
func KubectlInput(t testing.TB, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(controlplane.BinDir(), "kubectl"),
		append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// RewriterKubeconfig writes a kubeconfig for a kube-api-rewriter listening at server.
func RewriterKubeconfig(t testing.TB, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rewriter.kubeconfig")
	if err := controlplane.WriteRewriterKubeconfig(path, server); err != nil {
		t.Fatal(err)
	}
	return path
}
