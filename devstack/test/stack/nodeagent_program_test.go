package integration

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/nodeagent"
)

// testProgramInPrivateDir: a program below a private directory (the test's own directory in
// /tmp, as the suite's bin dir is) sees itself at its path, read-only, as an image shows its
// binary: the launcher Pod's container-disk-binary init container copies itself from there.
func (s *nodeAgentSuite) testProgramInPrivateDir(t *testing.T) {
	dir := t.TempDir()
	program := filepath.Join(dir, "sh")
	copyExecutable(t, "/bin/busybox", program)
	script := `test -r "$0" || { echo "cannot read myself"; exit 1; }
if echo x >> "$0"; then echo "myself is writable"; exit 1; fi
echo found myself`
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "self"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{program, "-c", script, program}}},
		},
	})
	pod := s.waitPod(t, "self", "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	logs, _ := os.ReadFile(nodeagent.Layout{Root: s.agentOf(pod).root}.LogFile(pod.UID, "main"))
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod %s: %+v\nlog:\n%s", pod.Status.Phase, pod.Status.ContainerStatuses, logs)
	}
}

func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
