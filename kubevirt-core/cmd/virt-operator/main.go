// Command virt-operator installs and updates the core's components from a KubeVirt resource and
// reports their state in its status. Like every core component it talks kubevirt.io to a
// kube-api-rewriter sidecar: its kubeconfig points at the sidecar's api listener.
//
// Every flag of its own can also be set through the environment: --image-prefix is
// VIRT_OPERATOR_IMAGE_PREFIX; the command line wins.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/go-logr/logr"

	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// version is stamped at build time (-ldflags "-X main.version=...") and reported in the
// KubeVirt's status.operatorVersion.
var version = "devel"

type options struct {
	leaderElect bool
	leaderNS    string
	metricsAddr string
	probeAddr   string
	pullPolicy  string
	cfg         virtoperator.Config
}

func main() {
	o := options{cfg: virtoperator.DefaultConfig()}
	o.cfg.OperatorVersion = version
	own := flag.NewFlagSet("virt-operator", flag.ExitOnError)
	own.BoolVar(&o.leaderElect, "leader-elect", true, "elect one active replica through a Lease")
	own.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the Lease; empty means the pod's own")
	own.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "Prometheus metrics (served behind kube-rbac-proxy); 0 disables")
	own.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz")
	own.StringVar(&o.cfg.ImagePrefix, "image-prefix", o.cfg.ImagePrefix, "put before each component's image name, e.g. registry.example.com/kubevirt/ (spec.imageRegistry overrides)")
	own.StringVar(&o.cfg.ImageTag, "image-tag", o.cfg.ImageTag, "tag of the components' images (spec.imageTag overrides)")
	own.StringVar(&o.cfg.RewriterImage, "rewriter-image", "", "image of the kube-api-rewriter sidecars; empty means <prefix>kube-api-rewriter:<tag>")
	own.StringVar(&o.cfg.KubeRBACProxyImage, "kube-rbac-proxy-image", "", "image of the kube-rbac-proxy in front of every metrics port; empty means <prefix>kube-rbac-proxy:<tag>")
	own.StringVar(&o.pullPolicy, "image-pull-policy", string(o.cfg.ImagePullPolicy), "pull policy of the components' images (spec.imagePullPolicy overrides)")
	own.StringVar(&o.cfg.HostMountNamespace, "host-mount-namespace", o.cfg.HostMountNamespace, "virt-handler's --host-mount-namespace: the node's mount namespace for hotplugged volumes, or \"parent\"")
	// The operator's log options, passed on to everything it installs.
	o.cfg.Log.Bind(own)
	replicas := own.Int("replicas", int(o.cfg.Replicas), "replicas of virt-api and virt-controller (spec.infra.replicas overrides)")
	if err := applyEnv(own); err != nil {
		fmt.Fprintln(os.Stderr, "virt-operator:", err)
		os.Exit(2)
	}
	// One command line: our flags and controller-runtime's --kubeconfig.
	own.VisitAll(func(f *flag.Flag) { flag.CommandLine.Var(f.Value, f.Name, f.Usage) })
	flag.Parse()
	h, err := o.cfg.Log.Handler(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "virt-operator:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(logr.FromSlogHandler(h))
	o.cfg.Replicas = int32(*replicas)
	o.cfg.ImagePullPolicy = corev1.PullPolicy(o.pullPolicy)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "virt-operator:", err)
		os.Exit(1)
	}
}

// applyEnv sets each flag of fs from VIRT_OPERATOR_<NAME> when that is set.
func applyEnv(fs *flag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := "VIRT_OPERATOR_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

func run(o options) error {
	switch o.cfg.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("--image-pull-policy %q: want Always, IfNotPresent or Never", o.cfg.ImagePullPolicy)
	}
	if o.cfg.Replicas < 1 {
		return fmt.Errorf("--replicas %d: want at least 1", o.cfg.Replicas)
	}
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
		Cache:                   virtoperator.CacheOptions(),
		Client:                  virtoperator.ClientOptions(),
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "virt-operator.kubevirt.io",
		LeaderElectionNamespace: o.leaderNS,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	r := virtoperator.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), o.cfg, clock.RealClock{})
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("KubeVirt controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("virt-operator").Info("starting", "version", version, "imagePrefix", o.cfg.ImagePrefix,
		"imageTag", o.cfg.ImageTag, "rewriterImage", o.cfg.RewriterImage, "kubeRBACProxyImage", o.cfg.KubeRBACProxyImage)
	return mgr.Start(ctrl.SetupSignalHandler())
}
