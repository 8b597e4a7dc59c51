// Package vmop runs VirtualMachineOperations against real guests: a stack of its own with
// kubevirt-core on two local nodes, the friendly CRDs, and virtualization-controller's
// VirtualMachineOperation reconciler in the test process, talking kubevirt.io through a real
// kube-api-rewriter as it does behind its sidecar.
package vmop

import (
	"context"
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
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmop"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}

// guestImage is the containerDisk reference the tests' VMs boot: the tiny guest, pushed into the
// module's DVCR (module.PushContainerDisk) once the module is up.
const guestImage = module.DVCRPullHost + "/" + module.LocalImages + "/" + guestImageName + ":latest"

const guestImageName = "tiny-guest-vmop"

// cluster is the private stack of a test, seen through the rewriter.
type cluster struct {
	rest *rest.Config
	kc   client.Client
	// cached is the controller's cached client, which its phase metric reads.
	cached client.Reader
	nodes  []string
}

// startCluster imports the guest image, starts a stack of its own with the module installed
// from the chart on the given nodes, and runs the VirtualMachineOperation reconciler against it
// until the test ends.
func startCluster(t *testing.T, nodes ...string) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	ctx := testenv.Context(t)
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	store := t.TempDir()
	mc, err := moduletest.Start(ctx, moduletest.Config{Repo: repo, Net: testenv.Get(t).Net, Nodes: nodes, ImageStore: store, Log: os.Stderr})
	if err != nil {
		t.Fatalf("stack: %v", err)
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
	if err := mc.Install(ctx); err != nil {
		t.Fatalf("install the module: %v", err)
	}
	if _, err := module.PushContainerDisk(ctx, mc.Stack, guestImageName, img.Disk); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", mc.Kubevirt)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha2.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{rest: cfg, kc: kc, cached: runController(t, cfg, scheme), nodes: nodes}
}

// runController runs a manager with the VirtualMachineOperation reconciler, as
// virtualization-controller's pkg/app wires it, through the rewriter kubeconfig.
func runController(t *testing.T, cfg *rest.Config, scheme *runtime.Scheme) client.Reader {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := vmop.NewReconciler(mgr.GetClient(), clock.RealClock{}, mgr.GetEventRecorder(vmop.EventSource))
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	sync, syncCancel := context.WithTimeout(ctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(sync) {
		t.Fatal("the controller's cache does not sync")
	}
	return mgr.GetClient()
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
