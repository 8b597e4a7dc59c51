package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/cvi"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
	"github.com/d8virt/virtualization-controller/pkg/controller/vi"
	"github.com/d8virt/virtualization-controller/pkg/dvcr"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
)

// Command is virtualization-controller: parse the options, run the manager until ctx ends.
type Command struct {
	stderr io.Writer
}

// NewCommand is the command writing its usage and logs to stderr.
func NewCommand() *Command { return &Command{stderr: os.Stderr} }

// Run runs the command with args (without the program name) and returns its exit code.
func (c *Command) Run(ctx context.Context, args []string) int {
	o, err := ParseOptions(args, c.stderr)
	if err != nil {
		_, _ = fmt.Fprintln(c.stderr, "virtualization-controller:", err)
		return 2
	}
	level, _ := parseLevel(o.LogLevel) // validated
	logger := logr.FromSlogHandler(slog.NewJSONHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	ctrl.SetLogger(logger)
	if err := run(ctx, o); err != nil {
		logger.Error(err, "virtualization-controller stopped")
		return 1
	}
	return 0
}

func run(ctx context.Context, o Options) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                  scheme,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "virtualization-controller",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		// Importer Pods live in the module's namespace only; the cache holds no other Pod.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Namespaces: map[string]cache.Config{o.Namespace: {}}},
		}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	pods := image.PodConfig{
		Namespace: o.Namespace, Image: o.ImporterImage,
		DVCRAddress: o.DVCRAddress, DVCRPullAddress: o.DVCRPullAddress,
		DVCRPusherSecret: o.DVCRPusherSecret, DVCRTLSSecret: o.DVCRTLSSecret, UploadTimeout: o.UploadTimeout,
	}
	scraper := importerprogress.NewScraper(&http.Client{Timeout: 5 * time.Second})
	images := dvcr.NewImages(o.DVCRAuthFile, o.DVCRCAFile)
	imports := image.NewImportMetrics()
	for _, c := range imports.Collectors() {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	for kind, source := range map[image.Kind]string{cvi.Kind{}: cvi.EventSource, vi.Kind{}: vi.EventSource} {
		r := image.NewReconciler(image.Config{
			Kind: kind, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pods: pods,
			Progress: scraper, Images: images, Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder(source), Metrics: imports,
			NewToken:         newToken,
			ProgressInterval: o.ProgressInterval, SourceInterval: o.SourceInterval,
		})
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("%s controller: %w", kind.Name(), err)
		}
		if err := ctrlmetrics.Registry.Register(image.NewPhaseCollector(kind, mgr.GetClient())); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return mgr.Start(ctx)
}

// newToken is 32 random bytes in hex: an upload token.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
