package testenv

import (
	"bytes"
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

// KubectlInput runs kubectl with stdin and returns its output and error: stdout when it succeeds,
// stdout and stderr when it fails (for tests that expect it to fail). Warnings on stderr, such as
// a short name that two groups share (vm through a rewriter: kubevirt.io's and the friendly
// VirtualMachine), are not part of a successful command's output.
func KubectlInput(t testing.TB, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(controlplane.BinDir(), "kubectl"),
		append([]string{"--kubeconfig", kubeconfig, "--cache-dir", t.TempDir()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
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
