// Command virt-controller runs the core's controllers. In a cluster it talks kubevirt.io to a
// kube-api-rewriter sidecar: its kubeconfig points at the sidecar's api listener.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/go-logr/logr"

	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	virtmetrics "github.com/d8virt/kubevirt-core/pkg/virtcontroller/metrics"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/migration"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/node"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/replicaset"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vm"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vmi"
	"github.com/d8virt/logopts"
)

func main() {
	var (
		leaderElect bool
		leaderNS    string
		metricsAddr string
		probeAddr   string
		launcher    vmi.LauncherConfig
		workers     workers
	)
	// --kubeconfig (the rewriter sidecar's) comes with controller-runtime's config package.
	flag.BoolVar(&leaderElect, "leader-elect", true, "elect one active replica through a Lease")
	flag.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the Lease; empty means the pod's own")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "Prometheus metrics (served behind kube-rbac-proxy); 0 disables")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz")
	flag.StringVar(&launcher.Image, "launcher-image", "virt-launcher:latest", "image of the compute container of virt-launcher Pods")
	flag.BoolVar(&launcher.Emulation, "use-emulation", false, "run guests under TCG (nodes without working KVM)")
	// One worker serializes every VM's start behind the others' API round trips: ten VMs created
	// at once waited up to 6 s for their VMI under TCG on 2 cores (make bench-vms).
	flag.IntVar(&workers.vm, "vm-workers", 4, "VirtualMachines reconciled at once")
	flag.IntVar(&workers.vmi, "vmi-workers", 4, "VirtualMachineInstances reconciled at once")
	launcher.Log = logopts.Default()
	// Its own log options, which it passes on to the launchers.
	launcher.Log.Bind(flag.CommandLine)
	flag.Parse()
	h, err := launcher.Log.Handler(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "virt-controller:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(logr.FromSlogHandler(h))
	if workers.vm < 1 || workers.vmi < 1 {
		fmt.Fprintf(os.Stderr, "virt-controller: --vm-workers %d and --vmi-workers %d must be at least 1\n", workers.vm, workers.vmi)
		os.Exit(2)
	}
	if err := run(leaderElect, leaderNS, metricsAddr, probeAddr, launcher, workers); err != nil {
		fmt.Fprintln(os.Stderr, "virt-controller:", err)
		os.Exit(1)
	}
}

// workers are how many objects of a kind the controllers reconcile at once.
type workers struct{ vm, vmi int }

func run(leaderElect bool, leaderNS, metricsAddr, probeAddr string, launcher vmi.LauncherConfig, workers workers) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme, err := corescheme.New()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "virt-controller.kubevirt.io",
		LeaderElectionNamespace: leaderNS,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	clk := clock.RealClock{}
	if err := vm.NewReconciler(mgr.GetClient(), clk, mgr.GetEventRecorder(vm.EventSource)).SetupWithManager(mgr, workers.vm); err != nil {
		return fmt.Errorf("VM controller: %w", err)
	}
	vmiController := vmi.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), launcher, clk, mgr.GetEventRecorder(vmi.EventSource))
	if err := vmiController.SetupWithManager(mgr, workers.vmi); err != nil {
		return fmt.Errorf("VMI controller: %w", err)
	}
	if err := replicaset.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), clk).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("VMI replica set controller: %w", err)
	}
	if err := node.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), clk).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("node controller: %w", err)
	}
	migrationController := migration.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), launcher, clk)
	if err := migrationController.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("migration controller: %w", err)
	}
	// The manager's registry already carries the workqueue and reconcile metrics of every
	// controller; KubeVirt's VMI phase gauge joins them, read from the same cache.
	if err := ctrlmetrics.Registry.Register(&virtmetrics.VMICollector{Reader: mgr.GetCache()}); err != nil {
		return fmt.Errorf("register VMI metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
