package integration

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/proc"
	"github.com/d8virt/devstack/testenv"
)

// A second stack next to the shared one: up is idempotent, kubectl works against it, and down
// leaves no daemon and no lock behind.
func TestSecondStackSideBySide(t *testing.T) {
	env := testenv.Get(t)
	base, err := testenv.FreePortBase(env.Net)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := controlplane.New(controlplane.Config{StateDir: dir, BinDir: controlplane.BinDir(), PortBase: base, Net: env.Net})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Down(true) })
	ctx := context.Background()
	if err := s.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	pids := s.Status()
	if err := s.Up(ctx); err != nil {
		t.Fatalf("second up: %v", err)
	}
	for name, pid := range s.Status() {
		if pid == 0 || pid != pids[name] {
			t.Errorf("second up restarted %s: pid %d, was %d", name, pid, pids[name])
		}
	}

	kubectl := filepath.Join(controlplane.BinDir(), "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", s.KubeconfigPath(), "get", "ns", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get ns: %v\n%s", err, out)
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !strings.Contains(string(out), "namespace/"+ns+"\n") {
			t.Errorf("kubectl get ns lacks %s:\n%s", ns, out)
		}
	}
	out, err = exec.Command(kubectl, "--kubeconfig", s.KubeconfigPath(), "api-resources").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "customresourcedefinitions") {
		t.Fatalf("kubectl api-resources: %v\n%s", err, out)
	}
	out, err = exec.Command(kubectl, "--kubeconfig", s.KubeconfigPath(), "version", "-o", "json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"gitVersion": "`+controlplane.K8sVersion+`"`) {
		t.Fatalf("kubectl version does not report %s: %v\n%s", controlplane.K8sVersion, err, out)
	}

	// Its Services live in a range of their own: the ClusterIPs of two stacks never clash on the
	// host that serves them all.
	out, err = exec.Command(kubectl, "--kubeconfig", s.KubeconfigPath(), "get", "svc", "kubernetes", "-o", "jsonpath={.spec.clusterIP}").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get svc kubernetes: %v\n%s", err, out)
	}
	shared, err := env.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mine := netip.MustParseAddr(string(out)); !s.Config().ServicePrefix().Contains(mine) || mine.String() == shared.Spec.ClusterIP {
		t.Errorf("the second stack's kubernetes Service has %s (range %s), the shared one's %s", mine, s.Config().ServicePrefix(), shared.Spec.ClusterIP)
	}

	if err := s.Down(false); err != nil {
		t.Fatalf("down: %v", err)
	}
	for name, pid := range pids {
		if proc.Alive(pid) {
			t.Errorf("%s (pid %d) still runs after down", name, pid)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".lock")); !os.IsNotExist(err) {
		t.Errorf("down left the lock file: %v", err)
	}
	if s.Running() {
		t.Error("stack reports running after down")
	}
}
