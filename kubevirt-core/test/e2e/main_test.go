// Package e2e runs virtual machines for real: a control plane of its own, kubevirt-core with a
// rewriter in front of every component, a local node agent running virt-handler and the launcher
// Pods, and the tiny guest booting under QEMU (TCG) through each launcher's own libvirtd.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/hack/pkg/core"
	"github.com/d8virt/hack/pkg/guest"
	"github.com/d8virt/hack/pkg/nodeagent"
	"github.com/d8virt/hack/pkg/stack"
	"github.com/d8virt/hack/pkg/testenv"
)

func TestMain(m *testing.M) {
	// The tests' own clients log nothing worth reading; the components' logs are dumped on failure.
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}

// guestImage is the containerDisk reference the tests' VMs boot.
const guestImage = "d8v.local/tiny-guest:e2e"

// cluster is one local cluster with nodes, set up for a test.
type cluster struct {
	stack *stack.Stack
	// kubevirt is the kubeconfig that talks kubevirt.io through a rewriter, as users of the core do.
	kubevirt string
	rest     *rest.Config
	nodes    []string
	// core is how the core was placed on the stack.
	core core.Options
}

// startCluster builds the binaries, imports the guest image, and starts a stack of its own with
// the core and the given nodes. Everything stops and is removed at the end of the test.
func startCluster(t testing.TB, nodes ...string) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	env := testenv.Get(t)
	ctx := testenv.Context(t)
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/",
		"./kube-api-rewriter/cmd/kube-api-rewriter", "./kubevirt-core/cmd/virt-controller", "./kubevirt-core/cmd/virt-api",
		"./kubevirt-core/cmd/virt-handler", "./kubevirt-core/cmd/virt-launcher", "./hack/cmd/node-agent")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	store := t.TempDir()
	if _, err := nodeagent.ImportImage(store, guestImage, img.Disk); err != nil {
		t.Fatal(err)
	}

	base, err := testenv.FreePortBase(env.Net)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.New(stack.Config{StateDir: t.TempDir(), BinDir: stack.BinDir(), PortBase: base, Net: env.Net})
	if err != nil {
		t.Fatal(err)
	}
	// Test hosts are machine-wide: e2e binaries running side by side (other packages, other
	// checkouts) must each have their own virt-api host, or they share its ports and one's
	// cleanup removes the other's.
	host := fmt.Sprintf("e2e-virt-api-%d", os.Getpid())
	opts := core.Options{BinDir: bin, Stack: s, HostName: host, Nodes: nodes, ImageStore: store}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, s)
		}
		if err := s.Down(false); err != nil {
			t.Errorf("down: %v", err)
		}
		// A stopped agent leaves its pods running, as a kubelet does: their processes (the
		// handlers, a guest still running), network namespaces and addresses would outlive the
		// test. Their records are in the state directory, so they go before it.
		for _, n := range nodes {
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
	if out, err := testenv.KubectlInput(t, s.KubeconfigPath(), "", "apply", "--server-side", "-R", "-f", filepath.Join(repo, "crds")); err != nil {
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
	kv := core.KubeconfigPath(s)
	cfg, err := clientcmd.BuildConfigFromFlags("", kv)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{stack: s, kubevirt: kv, rest: cfg, nodes: nodes, core: opts}
}

// dumpLogs prints the tail of every daemon's and Pod's log, which is what one needs to see why
// a VM did not come up.
func dumpLogs(t testing.TB, s *stack.Stack) {
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

// eventually polls check until it is nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	ctx := testenv.Context(t)
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
