package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/virtualization-controller/pkg/cabundle"
	"github.com/d8virt/virtualization-controller/pkg/classcrd"
	"github.com/d8virt/virtualization-controller/pkg/controller/cvi"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
	"github.com/d8virt/virtualization-controller/pkg/controller/vd"
	"github.com/d8virt/virtualization-controller/pkg/controller/vi"
	"github.com/d8virt/virtualization-controller/pkg/controller/vm"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmbda"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmclass"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmip"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmop"
	"github.com/d8virt/virtualization-controller/pkg/dvcr"
	"github.com/d8virt/virtualization-controller/pkg/dvcrgc"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/subresources"
	"github.com/d8virt/virtualization-controller/pkg/webhook/classconversion"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmdefaulting"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmipvalidation"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmvalidation"
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
	handler, err := o.Log.Handler(c.stderr)
	if err != nil { // validated by ParseOptions
		_, _ = fmt.Fprintln(c.stderr, "virtualization-controller:", err)
		return 2
	}
	logger := logr.FromSlogHandler(handler)
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
	// The internal VMs are kubevirt.io objects here: the apiserver is reached through the
	// kube-api-rewriter sidecar (docs/virtualization-controller.md).
	for _, add := range []func(*runtime.Scheme) error{v1alpha2.AddToScheme, v1alpha3.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("scheme: %w", err)
		}
	}
	managed := labels.SelectorFromSet(labels.Set{vd.LabelManagedBy: vd.ManagedBy})
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                  scheme,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "virtualization-controller",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		WebhookServer:           webhook.NewServer(webhook.Options{Port: o.WebhookPort, CertDir: o.WebhookCertDir}),
		// The cache holds only the Pods (importers) and claims (disks') the controller made:
		// a ClusterVirtualImage's importer runs in the module's namespace, a VirtualDisk's next
		// to its claim.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: managed},
			&corev1.PersistentVolumeClaim{}: {Label: managed},
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
		DVCRPusherSecret: o.DVCRPusherSecret, DVCRTLSSecret: o.DVCRTLSSecret, UploadTimeout: o.UploadTimeout, UploadServiceType: o.UploadServiceType,
		Log: o.Log,
	}
	exporter := importerpod.DVCRExporter{
		Namespace: o.Namespace, Image: o.ImporterImage, Log: o.Log, PullerSecret: o.DVCRPullerSecret, TLSSecret: o.DVCRTLSSecret,
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), NewToken: newToken,
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
			DVCRExporter:     exporter,
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
	if o.DVCRGCSchedule != nil {
		gc := &dvcrgc.Collector{
			Schedule: o.DVCRGCSchedule, Deployment: types.NamespacedName{Namespace: o.Namespace, Name: o.DVCRDeployment},
			Reader: mgr.GetAPIReader(), Pods: mgr.GetClient(), Selector: managed, Writer: mgr.GetClient(),
			Clock: clock.RealClock{}, Retry: time.Minute, Log: mgr.GetLogger().WithName("dvcrgc"), Requests: dvcrgc.NewRequestsCounter(),
		}
		if err := ctrlmetrics.Registry.Register(gc.Requests); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if err := mgr.Add(gc); err != nil {
			return fmt.Errorf("dvcr garbage collection: %w", err)
		}
	}
	vms := vm.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), clock.RealClock{}, mgr.GetEventRecorder(vm.EventSource))
	if err := vms.SetupWithManager(mgr, o.VMWorkers); err != nil {
		return fmt.Errorf("virtualmachine controller: %w", err)
	}
	classes := vmclass.NewReconciler(mgr.GetClient(), clock.RealClock{}, mgr.GetEventRecorder(vmclass.EventSource))
	if err := classes.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("virtualmachineclass controller: %w", err)
	}
	ops := vmop.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), clock.RealClock{}, mgr.GetEventRecorder(vmop.EventSource))
	if err := ops.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("virtualmachineoperation controller: %w", err)
	}
	hotplug, err := subresources.New(mgr.GetConfig())
	if err != nil {
		return err
	}
	copier := vmbda.Copier{Client: mgr.GetClient(), Exporter: exporter, Progress: scraper, Image: o.ImporterImage, Log: o.Log}
	attachments := vmbda.NewReconciler(mgr.GetClient(), hotplug, copier, clock.RealClock{}, mgr.GetEventRecorder(vmbda.EventSource))
	if err := attachments.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("virtualmachineblockdeviceattachment controller: %w", err)
	}
	if err := vmip.Setup(ctx, mgr, vmip.Config{Range: o.VirtualMachineCIDRs, Retention: o.LeaseRetention, Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder(vmip.EventSource)}); err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{vm.NewCollector(mgr.GetClient()), vmclass.NewPhaseCollector(mgr.GetClient()),
		vmop.NewPhaseCollector(mgr.GetClient()), vmip.NewPhaseCollector(mgr.GetClient()), vd.NewPhaseCollector(mgr.GetClient()),
		vmbda.NewPhaseCollector(mgr.GetClient())} {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if err := setupWebhooks(mgr, o); err != nil {
		return err
	}
	disks := vd.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), vd.Config{
		Pods:         vd.PodConfig{Image: o.ImporterImage, Log: o.Log, UploadTimeout: o.UploadTimeout, UploadServiceType: o.UploadServiceType},
		DVCRExporter: exporter, Interval: o.ProgressInterval, NewToken: newToken,
	}, scraper, clock.RealClock{}, mgr.GetEventRecorder(vd.EventSource))
	if err := disks.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("virtualdisk controller: %w", err)
	}
	return mgr.Start(ctx)
}

// setupWebhooks registers the webhook handlers and the VirtualMachineClass CRD's conversion and
// storage migration.
func setupWebhooks(mgr manager.Manager, o Options) error {
	srv := mgr.GetWebhookServer()
	decoder := admission.NewDecoder(mgr.GetScheme())
	srv.Register(classconversion.Path, classconversion.NewHandler(mgr.GetLogger().WithName("classconversion")))
	srv.Register(vmipvalidation.Path, &webhook.Admission{Handler: vmipvalidation.NewValidator(mgr.GetAPIReader(), o.VirtualMachineCIDRs, decoder)})
	srv.Register(vmvalidation.Path, &webhook.Admission{Handler: vmvalidation.NewValidator(mgr.GetAPIReader(), decoder)})
	srv.Register(vmdefaulting.Path, &webhook.Admission{Handler: vmdefaulting.NewDefaulter(mgr.GetAPIReader(), decoder)})
	if err := mgr.AddReadyzCheck("webhook", srv.StartedChecker()); err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	ca, err := os.ReadFile(o.WebhookCAFile)
	if err != nil {
		return fmt.Errorf("webhook CA: %w", err)
	}
	crds, err := apiextensionsclient.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	path, port := classconversion.Path, int32(443)
	cfg := apiextensionsv1.WebhookClientConfig{CABundle: ca, Service: &apiextensionsv1.ServiceReference{
		Namespace: o.Namespace, Name: o.WebhookService, Path: &path, Port: &port,
	}}
	if err := mgr.Add(classcrd.NewMigrator(crds, dyn, cfg, mgr.GetLogger().WithName("classcrd"), 2*time.Second)); err != nil {
		return fmt.Errorf("classcrd: %w", err)
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	return mgr.Add(cabundle.NewPatcher(kube, o.WebhookConfiguration, ca, mgr.GetLogger().WithName("cabundle"), 2*time.Second))
}

// newToken is 32 random bytes in hex: an upload token.
func newToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
