// Package e2e runs virtual machines for real: a control plane of its own, kubevirt-core with a
// rewriter in front of every component, a local node agent running virt-handler and the launcher
// Pods, and the tiny guest booting under QEMU (TCG) through each launcher's own libvirtd.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/core"
	"github.com/d8virt/devstack/coretest"
	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/testenv"
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
	stack *controlplane.Stack
	// kubevirt is the kubeconfig that talks kubevirt.io through a rewriter, as users of the core do.
	kubevirt string
	rest     *rest.Config
	nodes    []string
	// core is how the core was placed on the stack.
	core core.Options
}

// startCluster imports the guest image and starts a stack of its own with the core and the given
// nodes. Everything stops and is removed at the end of the test.
func startCluster(t testing.TB, nodes ...string) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	repo, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	img, err := guest.BuildImage(testenv.Context(t))
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	store := t.TempDir()
	if _, err := nodeagent.ImportImage(store, guestImage, img.Disk); err != nil {
		t.Fatal(err)
	}
	// Test hosts are machine-wide: e2e binaries running side by side (other packages, other
	// checkouts) must each have their own virt-api host, or they share its ports and one's
	// cleanup removes the other's.
	host := fmt.Sprintf("e2e-virt-api-%d", os.Getpid())
	cc := coretest.Start(t, coretest.Config{Repo: repo, HostName: host, Nodes: nodes, ImageStore: store})
	cfg, err := clientcmd.BuildConfigFromFlags("", cc.Kubevirt)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{stack: cc.Stack, kubevirt: cc.Kubevirt, rest: cfg, nodes: nodes, core: cc.Core}
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
