// Package vmop runs VirtualMachineOperations against a real guest through the chart's
// virtualization-controller: a cluster with the module installed from the chart on two local
// nodes (devstack/moduletest), and a friendly VirtualMachine that boots the tiny guest from a
// VirtualDisk made from a ClusterVirtualImage imported over HTTP (devstack/friendlyvm, as the
// module e2e sets it up). It boots VMs, so it holds the machine-wide lock:
//
//	flock /tmp/vm-boot.lock go test -count=1 -v ./devstack/test/vmop/
package vmop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/corescheme"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}

// cluster is the module's cluster of a test.
type cluster struct {
	// kubeconfig is the admin's; admin reads and writes the friendly kinds and core objects.
	kubeconfig string
	admin      client.Client
	// kubevirt talks kubevirt.io through a rewriter, as users of the core do (the internal VMIs);
	// kubevirtREST is its config, for the console.
	kubevirt     client.Client
	kubevirtREST *rest.Config
	nodes        []string
}

// startCluster takes the suite's cluster with the module (moduletest.Installed) or starts one of
// its own on the nodes; one of its own goes when the test ends.
func startCluster(t *testing.T, nodes ...string) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	ctx := longContext(t)
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The suite's shared cluster, or one of the package's own on the nodes.
	mc, err := moduletest.Installed(ctx, moduletest.Config{Repo: repo, Net: testenv.Get(t).Net, Nodes: nodes, Log: os.Stderr})
	if err != nil {
		t.Fatalf("the cluster with the module: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			mc.Logs(&b)
			t.Log(b.String())
		}
		if err := mc.Stop(); err != nil {
			t.Errorf("stop the stack: %v", err)
		}
	})
	c := &cluster{kubeconfig: mc.Stack.KubeconfigPath(), nodes: mc.Nodes}
	adminREST, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if c.admin, err = client.New(adminREST, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if c.kubevirtREST, err = clientcmd.BuildConfigFromFlags("", mc.Kubevirt); err != nil {
		t.Fatal(err)
	}
	core, err := corescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	if c.kubevirt, err = client.New(c.kubevirtREST, client.Options{Scheme: core}); err != nil {
		t.Fatal(err)
	}
	return c
}

// longContext bounds the whole test: building the module's binaries and installing it on a
// loaded machine alone can take longer than testenv.Context's five minutes.
func longContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (c *cluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return testenv.Kubectl(t, c.kubeconfig, args...)
}

// apply applies manifest; cleanup deletes it when the test ends.
func (c *cluster) apply(t *testing.T, name, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubectl(t, "apply", "-f", file)
	t.Cleanup(func() { c.kubectl(t, "delete", "-f", file, "--ignore-not-found", "--timeout=3m") })
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

// durations are the measured operations, logged at the end of the test.
type durations []string

func (d *durations) add(op string, took time.Duration) {
	*d = append(*d, fmt.Sprintf("%-12s %s", op, took.Round(100*time.Millisecond)))
}
