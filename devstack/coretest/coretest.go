// Package coretest starts kubevirt-core on a private local stack for a test: the control plane,
// the CRDs, the core with a rewriter in front of each component and, when asked, local nodes.
// Everything stops and is removed when the test ends.
package coretest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/core"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/testenv"
)

// Config says what to start.
type Config struct {
	// Repo is the repository root, where the binaries are built from and crds/ is.
	Repo string
	// HostName names virt-api's test host; test hosts are machine-wide, so tests running side
	// by side need different ones.
	HostName string
	// Nodes are the local nodes to run; none means a control plane without nodes.
	Nodes []string
	// ImageStore is the nodes' containerDisk store.
	ImageStore string
}

// Cluster is a running stack with the core.
type Cluster struct {
	Stack *controlplane.Stack
	Core  core.Options
	// Kubevirt is a kubeconfig that talks kubevirt.io through a rewriter, as users of the core do.
	Kubevirt string
}

// Start builds the binaries and starts the cluster; on failure the test fails and every daemon's
// and Pod's log tail is printed.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	env := testenv.Get(t)
	ctx := testenv.Context(t)
	bin := t.TempDir()
	pkgs := []string{"./kube-api-rewriter/cmd/kube-api-rewriter", "./kubevirt-core/cmd/virt-controller", "./kubevirt-core/cmd/virt-api"}
	if len(cfg.Nodes) > 0 {
		pkgs = append(pkgs, "./kubevirt-core/cmd/virt-handler", "./kubevirt-core/cmd/virt-launcher", "./devstack/cmd/node-agent")
	}
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, pkgs...)...)
	build.Dir = cfg.Repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}

	base, err := testenv.FreePortBase(env.Net)
	if err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.New(controlplane.Config{StateDir: t.TempDir(), BinDir: controlplane.BinDir(), PortBase: base, Net: env.Net})
	if err != nil {
		t.Fatal(err)
	}
	opts := core.Options{BinDir: bin, Stack: s, HostName: cfg.HostName, Nodes: cfg.Nodes, ImageStore: cfg.ImageStore}
	t.Cleanup(func() {
		if t.Failed() {
			DumpLogs(t, s)
		}
		if err := s.Down(false); err != nil {
			t.Errorf("down: %v", err)
		}
		// A stopped agent leaves its pods running, as a kubelet does: their processes (the
		// handlers, a guest still running), network namespaces and addresses would outlive the
		// test. Their records are in the state directory, so they go before it.
		for _, n := range cfg.Nodes {
			if err := nodeagent.CleanupNode(core.NodeRoot(s, n), env.Net, 30*time.Second); err != nil {
				t.Errorf("clean up node %s: %v", n, err)
			}
		}
		if err := os.RemoveAll(s.Config().StateDir); err != nil {
			t.Errorf("purge the stack: %v", err)
		}
		if err := core.Down(env.Net, opts); err != nil {
			t.Errorf("core down: %v", err)
		}
	})
	if err := s.Up(ctx); err != nil {
		t.Fatalf("control plane: %v", err)
	}
	if out, err := testenv.KubectlInput(t, s.KubeconfigPath(), "", "apply", "--server-side", "-R", "-f", filepath.Join(cfg.Repo, "crds")); err != nil {
		t.Fatalf("apply CRDs: %v\n%s", err, out)
	}
	if opts.PortBase, err = testenv.FreePortBase(env.Net); err != nil {
		t.Fatal(err)
	}
	cs, err := core.Components(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.AddComponents(cs...)
	if err := s.Up(ctx); err != nil {
		t.Fatalf("core and nodes: %v", err)
	}
	return &Cluster{Stack: s, Core: opts, Kubevirt: core.KubeconfigPath(s)}
}

// DumpLogs prints the tail of every daemon's and Pod's log, which is what one needs to see why
// a VM did not come up.
func DumpLogs(t testing.TB, s *controlplane.Stack) {
	t.Helper()
	var files []string
	for _, pattern := range []string{
		filepath.Join(s.Config().StateDir, "logs", "*.log"),
		filepath.Join(s.Config().StateDir, "nodes", "*", "pods", "*", "logs", "*.log"),
	} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("==> %s <==\n%s", f, b)
	}
}
