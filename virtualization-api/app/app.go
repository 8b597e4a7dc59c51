package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/compatibility"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/d8virt/api/client/clientset/versioned"
	virtv1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-api/pkg/core"
	"github.com/d8virt/virtualization-api/pkg/metrics"
	"github.com/d8virt/virtualization-api/pkg/registry"
	"github.com/d8virt/virtualization-api/pkg/relay"
	"github.com/d8virt/virtualization-api/pkg/server"
	"github.com/d8virt/virtualization-api/pkg/sessions"
)

// NewCommand is the virtualization-api command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "virtualization-api",
		Short: "Serves the subresources of the virtualization.deckhouse.io VirtualMachines (console, vnc, portforward, ...) as an aggregated API",
		Long: `virtualization-api serves subresources.virtualization.deckhouse.io/v1alpha2 behind the cluster's
API (an APIService): it authenticates and authorizes the user through the cluster, checks the
friendly VirtualMachine, and calls the core's virt-api for its VMI as its own identity.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return run(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func run(ctx context.Context, o *Options) error {
	handler, err := o.Log.Handler(os.Stderr)
	if err != nil {
		return err
	}
	log := slog.New(handler)
	klog.SetSlogLogger(log)

	own, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("virtualization-api's identity: %w", err)
	}
	own = rest.CopyConfig(own)
	own.UserAgent = "virtualization-api"
	friendly, err := versioned.NewForConfig(own)
	if err != nil {
		return fmt.Errorf("client of the friendly API: %w", err)
	}
	kube, err := kubernetes.NewForConfig(own)
	if err != nil {
		return fmt.Errorf("client of the cluster: %w", err)
	}
	coreClient, err := core.New(own)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	deps := registry.Deps{
		VMs:  vmGetter{friendly},
		Core: coreClient,
		Sessions: sessions.New(sessions.Config{
			Leases: kube.CoordinationV1().Leases(o.SessionsNamespace), Identity: o.ReplicaName, Clock: clock.RealClock{},
			Duration: o.SessionLeaseDuration, Resource: virtv1alpha2.Resource("virtualmachines"),
		}),
		Metrics: metrics.New(reg),
		Relay:   relay.Config{PingInterval: o.PingInterval, CloseGrace: o.CloseGrace},
		Log:     log.Info,
	}

	cfg := server.NewConfig()
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString("1.37", "", "")
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, cfg.OpenAPIConfig); err != nil {
		return fmt.Errorf("authentication: %w", err)
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return fmt.Errorf("authorization: %w", err)
	}
	srv, err := server.New(cfg.Complete(), deps)
	if err != nil {
		return err
	}

	metricsLn, err := net.Listen("tcp", o.MetricsBindAddress)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	metricsSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := metricsSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener", "err", err)
		}
	}()
	defer metricsSrv.Close()

	log.Info("serving", "group", "subresources.virtualization.deckhouse.io/v1alpha2", "port", o.SecureServing.BindPort, "metrics", o.MetricsBindAddress)
	return srv.PrepareRun().RunWithContext(ctx)
}

// vmGetter reads friendly VirtualMachines through the typed client.
type vmGetter struct{ c versioned.Interface }

func (g vmGetter) Get(ctx context.Context, namespace, name string) (*virtv1alpha2.VirtualMachine, error) {
	return g.c.VirtualizationV1alpha2().VirtualMachines(namespace).Get(ctx, name, metav1.GetOptions{})
}
