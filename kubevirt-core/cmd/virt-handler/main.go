// Command virt-handler drives the virtual machines on one node through their launchers: it hands
// each VMI placed on the node to its virt-launcher, reports the domain's state back into the VMI,
// and keeps the node's heartbeat. In a cluster it runs as a DaemonSet and talks kubevirt.io to a
// kube-api-rewriter sidecar.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/go-logr/logr"

	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/mtls"
	"github.com/d8virt/kubevirt-core/pkg/nodecaps"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/heartbeat"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/nodelabeller"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/rest"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/vmimetrics"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/vmisync"
	"github.com/d8virt/logopts"
)

type options struct {
	nodeName    string
	podsDir     string
	heartbeat   time.Duration
	metricsAddr string
	// statsTimeout bounds a scrape's wait for the launchers' domain statistics.
	statsTimeout time.Duration
	probeAddr    string
	listen       string
	certFile     string
	keyFile      string
	clientCA     string
	// labellerDir holds the init container's node capabilities; empty leaves the labels alone.
	labellerDir      string
	labellerInterval time.Duration
	// hostMountNS is the node's mount namespace, where hotplugged volumes are bind-mounted.
	hostMountNS string
	// vmiWorkers is how many of the node's VMIs are synced at once.
	vmiWorkers int
	log        logopts.Options
}

func main() {
	var o options
	// --kubeconfig (the rewriter sidecar's) comes with controller-runtime's config package.
	flag.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "the node this handler serves (env NODE_NAME)")
	flag.StringVar(&o.podsDir, "pods-dir", "/var/lib/kubelet/pods", "the kubelet's pods directory, where the launcher Pods' volumes live")
	flag.DurationVar(&o.heartbeat, "heartbeat-interval", time.Minute, "how often the node's heartbeat is stamped")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "Prometheus metrics (served behind kube-rbac-proxy); 0 disables")
	flag.DurationVar(&o.statsTimeout, "domain-stats-timeout", 5*time.Second, "how long a scrape of the metrics waits for the launchers' domain statistics (the per-VMI metrics)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz")
	flag.StringVar(&o.listen, "listen", ":8186", "address of the API virt-api calls (commands, console, VNC)")
	flag.StringVar(&o.certFile, "tls-cert-file", "", "serving certificate of the API, for the name virt-handler; empty disables the API")
	flag.StringVar(&o.keyFile, "tls-key-file", "", "key of the serving certificate")
	flag.StringVar(&o.clientCA, "client-ca-file", "", "CA of the client certificates virt-api presents")
	flag.StringVar(&o.labellerDir, "node-labeller-dir", "", "directory where the init container (virt-launcher --node-labeller-dir) wrote the node's capabilities; empty disables the node labeller")
	flag.DurationVar(&o.labellerInterval, "node-labeller-interval", 3*time.Minute, "how often the node's CPU and machine labels are made right again")
	flag.StringVar(&o.hostMountNS, "host-mount-namespace", hotplug.DefaultHostMountNamespace, "the node's mount namespace, where hotplugged volumes are bind-mounted into the launcher Pods (nsenter): /proc/<pid>/ns/mnt of a process in it (the default, the node's init, needs the host's PID namespace), or \""+hotplug.ParentMountNamespace+"\" for the namespace of virt-handler's parent, for a container runtime that hides pid 1's namespace but starts its containers from the node's")
	o.log = logopts.Default()
	// A sync hands a VMI to its launcher and waits while the launcher starts QEMU (seconds under
	// TCG): with one worker the node's starts queued behind each other (make bench-vms).
	flag.IntVar(&o.vmiWorkers, "vmi-workers", 8, "the node's VMIs synced at once")
	o.log.Bind(flag.CommandLine)
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "virt-handler:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.nodeName == "" {
		return fmt.Errorf("--node-name (or NODE_NAME) is required")
	}
	if o.vmiWorkers < 1 {
		return fmt.Errorf("--vmi-workers %d must be at least 1", o.vmiWorkers)
	}
	h, err := o.log.Handler(os.Stderr)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.FromSlogHandler(h))
	log := slog.New(h).With("component", "virt-handler", "node", o.nodeName)
	mounter, err := hotplug.NewNodeMounter(o.hostMountNS)
	if err != nil {
		return fmt.Errorf("--host-mount-namespace: %w", err)
	}
	if err := mounter.Check(); err != nil {
		// VMs without hotplugged volumes run regardless.
		log.Warn("volume hotplug will fail: the node's mount namespace cannot be entered; see --host-mount-namespace", "err", err)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme, err := corescheme.New()
	if err != nil {
		return err
	}
	// The handler only ever looks at its own node: its VMIs by label, its launcher Pods by node
	// and label, so a big cluster costs it nothing.
	onNode := labels.SelectorFromSet(labels.Set{kubevirtv1.NodeNameLabel: o.nodeName})
	launchers := labels.SelectorFromSet(labels.Set{kubevirtv1.AppLabel: launcherpod.AppLabelValue})
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&kubevirtv1.VirtualMachineInstance{}: {Label: onNode},
			&corev1.Pod{}:                        {Label: launchers, Field: fields.OneTermEqualSelector("spec.nodeName", o.nodeName)},
		}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	// VMIs migrating to this node carry its name in another label; a cache of their own keeps
	// the main one to this node's VMIs.
	incoming, err := cache.New(cfg, cache.Options{
		Scheme: scheme,
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&kubevirtv1.VirtualMachineInstance{}: {Label: labels.SelectorFromSet(labels.Set{kubevirtv1.MigrationTargetNodeNameLabel: o.nodeName})},
		},
	})
	if err != nil {
		return fmt.Errorf("cache of incoming VMIs: %w", err)
	}
	if err := mgr.Add(incoming); err != nil {
		return err
	}
	r := vmisync.NewReconciler(mgr.GetClient(), o.nodeName, o.podsDir, clock.RealClock{}, mgr.GetEventRecorder(vmisync.EventSource), log)
	r.TargetVMIs = incoming
	r.Hotplug = &hotplug.Volumes{Reader: mgr.GetAPIReader(), PodsDir: o.podsDir, Mounter: mounter}
	if err := r.SetupWithManager(mgr, o.vmiWorkers); err != nil {
		return err
	}
	vmis := vmimetrics.New(vmimetrics.NewNodeLister(mgr.GetCache(), o.nodeName, r.Conns), o.statsTimeout, log.With("part", "vmi-metrics"))
	if err := ctrlmetrics.Registry.Register(vmis); err != nil {
		return fmt.Errorf("register the per-VMI metrics: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	beater := &heartbeat.Beater{Kube: kube, NodeName: o.nodeName, Interval: o.heartbeat, Log: log}
	if err := mgr.Add(manager.RunnableFunc(beater.Run)); err != nil {
		return err
	}
	if o.labellerDir != "" {
		caps, err := nodecaps.Load(o.labellerDir, launcherapi.Arch())
		if err != nil {
			return err
		}
		l := &nodelabeller.Labeller{Kube: kube, NodeName: o.nodeName, Caps: caps, Interval: o.labellerInterval,
			Log: log.With("part", "node-labeller"), RealtimeFile: "/proc/sys/kernel/sched_rt_runtime_us"}
		if err := mgr.Add(manager.RunnableFunc(l.Run)); err != nil {
			return err
		}
	}
	if o.certFile != "" {
		api := &rest.Server{Client: mgr.GetClient(), NodeName: o.nodeName, PodsDir: o.podsDir, Conns: r.Conns, Log: log}
		if err := mgr.Add(apiServer(o, api)); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting", "podsDir", o.podsDir)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// apiServer serves the handler's API for virt-api over mutual TLS until the manager stops.
func apiServer(o options, api *rest.Server) manager.RunnableFunc {
	return func(ctx context.Context) error {
		t, err := mtls.Server(o.certFile, o.keyFile, o.clientCA)
		if err != nil {
			return fmt.Errorf("handler API: %w", err)
		}
		srv := &http.Server{Addr: o.listen, Handler: api.Handler(), TLSConfig: t, ReadHeaderTimeout: 30 * time.Second}
		errc := make(chan error, 1)
		go func() { errc <- srv.ListenAndServeTLS("", "") }()
		select {
		case err := <-errc:
			return fmt.Errorf("handler API on %s: %w", o.listen, err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
