// Package e2e runs virtual machines for real: a cluster with two local nodes (node agents; the
// suite's shared one, or one of the package's own, moduletest.Installed), the module installed
// from the chart as `make run` installs it (virt-operator installs virt-api, virt-controller and
// virt-handler, each behind its rewriter sidecar and under its own ServiceAccount), and the tiny
// guest booting under QEMU (TCG) through each launcher's own libvirtd. The tests share that one installed module: installing it costs more
// than most tests.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) {
	// The tests' own clients log nothing worth reading; the components' logs are dumped on failure.
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m, stopShared)
}

// guestImage is the containerDisk reference the tests' VMs boot: the tiny guest, pushed into the
// module's DVCR (module.PushContainerDisk) under a name of this package's own.
const guestImage = module.DVCRPullHost + "/" + module.LocalImages + "/" + guestImageName + ":latest"

const guestImageName = "tiny-guest-e2e"

// cluster is the local cluster with the module the tests share.
type cluster struct {
	stack *controlplane.Stack
	// kubevirt is the kubeconfig that talks kubevirt.io through a rewriter, as users of the core do.
	kubevirt string
	rest     *rest.Config
	nodes    []string
}

var (
	sharedOnce sync.Once
	shared     *moduletest.Cluster
	sharedErr  error
)

// startCluster returns the cluster the package's tests share, taking it (the suite's, or one of
// the package's own, moduletest.Installed) on first use; a cluster of the package's own stops
// after the last test (stopShared). A test that fails gets the tail of every component's log.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	sharedOnce.Do(func() { shared, sharedErr = startShared(t) })
	if sharedErr != nil {
		t.Fatalf("the shared cluster: %v", sharedErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			shared.Logs(&b)
			t.Log(b.String())
		}
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", shared.Kubevirt)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{stack: shared.Stack, kubevirt: shared.Kubevirt, rest: cfg, nodes: shared.Nodes}
}

func startShared(t testing.TB) (*moduletest.Cluster, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	repo, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		return nil, err
	}
	img, err := guest.BuildImage(ctx)
	if err != nil {
		return nil, fmt.Errorf("guest image: %w", err)
	}
	start := time.Now()
	// Live migration needs two nodes.
	c, err := moduletest.Installed(ctx, moduletest.Config{Repo: repo, Net: testenv.Get(t).Net, Nodes: []string{"node-a", "node-b"}, Log: os.Stderr})
	if err != nil {
		return nil, err
	}
	if _, err := module.PushContainerDisk(ctx, c.Stack, guestImageName, img.Disk); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	fmt.Fprintf(os.Stderr, "e2e: the cluster with the module is up after %s\n", time.Since(start).Round(time.Second))
	return c, nil
}

// stopShared stops the package's own cluster after the last test.
func stopShared() error {
	if shared == nil {
		return nil
	}
	return shared.Stop()
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
