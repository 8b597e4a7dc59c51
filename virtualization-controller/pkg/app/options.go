// Package app is virtualization-controller's command: its options and the manager they build.
package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/dvcrgc"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
)

// Options are the command's flags, parsed and checked.
type Options struct {
	LeaderElect             bool
	LeaderElectionNamespace string
	MetricsBindAddress      string
	HealthProbeBindAddress  string
	// Namespace is the module's namespace: importer Pods run there, DVCR's Secrets are there.
	Namespace string
	// ImporterImage is the image of importer Pods.
	ImporterImage string
	// DVCRAddress is DVCR's push address (host:port), e.g. dvcr.d8-virtualization.svc:5000.
	DVCRAddress string
	// DVCRPullAddress is DVCR's read-only address that virtual machines pull from, e.g.
	// dvcr.d8-virtualization.svc: status.target.registryURL names the image there.
	DVCRPullAddress string
	// DVCRPusherSecret (.dockerconfigjson) and DVCRTLSSecret (ca.crt) are Secrets in Namespace.
	DVCRPusherSecret string
	DVCRTLSSecret    string
	// DVCRPullerSecret (.dockerconfigjson) is in Namespace: a VirtualDisk made from an image in
	// DVCR reads it with these credentials (copied into its importer's Secret, with DVCR's CA).
	DVCRPullerSecret string
	// DVCRAuthFile and DVCRCAFile are the same Secrets mounted into the controller's own Pod:
	// it deletes a deleted image's manifest from DVCR with them.
	DVCRAuthFile string
	DVCRCAFile   string
	// ProgressInterval is how often a running import's progress is read into status.
	ProgressInterval time.Duration
	// VirtualMachineCIDRs is the range of the machines' addresses (--virtual-machine-cidrs).
	VirtualMachineCIDRs ipam.Range
	// LeaseRetention is how long a released VirtualMachineIPAddressLease is kept before it is
	// deleted (its address is not handed to another Auto address meanwhile).
	LeaseRetention time.Duration
	// WebhookPort is the port of the webhook server (TLS, tls.crt and tls.key in WebhookCertDir).
	WebhookPort    int
	WebhookCertDir string
	// WebhookService is the Service in Namespace in front of the webhook server: the
	// VirtualMachineClass CRD's conversion is pointed at it, trusting WebhookCAFile.
	WebhookService string
	WebhookCAFile  string
	// WebhookConfiguration names the ValidatingWebhookConfiguration and the
	// MutatingWebhookConfiguration whose caBundle the controller sets to WebhookCAFile.
	WebhookConfiguration string
	// SourceInterval is how often an image that waits for its source (an object not Ready
	// yet, a missing pull secret) looks again.
	SourceInterval time.Duration
	// UploadTimeout is how long an Upload source's uploader waits for the upload to begin.
	UploadTimeout time.Duration
	// UploadServiceType is the type of an uploader's Service: ClusterIP, or NodePort for an
	// external upload URL at the uploader's node.
	UploadServiceType corev1.ServiceType
	// VMWorkers is how many VirtualMachines the VM controller reconciles at once.
	VMWorkers int
	// DVCRGCSchedule is when DVCR's storage is garbage-collected (a restart of DVCR's pod, whose
	// init container collects), as soon as no import runs; nil: never on schedule.
	DVCRGCSchedule cron.Schedule
	// DVCRDeployment is DVCR's Deployment in Namespace, which the collection restarts.
	DVCRDeployment string
	// Log is the log's level and format (--log-level, --log-format), passed on to importer Pods.
	Log logopts.Options
}

// ParseOptions parses args (without the program name). Usage and errors go to output.
func ParseOptions(args []string, output io.Writer) (Options, error) {
	o := Options{Log: logopts.Default()}
	fs := flag.NewFlagSet("virtualization-controller", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect one active replica through a Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease; empty means --namespace")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:8080", "Prometheus metrics (served behind kube-rbac-proxy); 0 disables")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "/healthz and /readyz")
	fs.StringVar(&o.Namespace, "namespace", "", "the module's namespace: importer Pods and DVCR's Secrets (required)")
	fs.StringVar(&o.ImporterImage, "importer-image", "", "image of importer Pods (required)")
	fs.StringVar(&o.DVCRAddress, "dvcr-address", "", "DVCR's push address, host:port (required)")
	fs.StringVar(&o.DVCRPullAddress, "dvcr-pull-address", "", "DVCR's read-only address, host[:port], for status.target.registryURL (required)")
	fs.StringVar(&o.DVCRPusherSecret, "dvcr-pusher-secret", "dvcr-pusher", "Secret (kubernetes.io/dockerconfigjson) with DVCR's push credentials, in --namespace")
	fs.StringVar(&o.DVCRPullerSecret, "dvcr-puller-secret", "dvcr-puller", "Secret (kubernetes.io/dockerconfigjson) with DVCR's read-only credentials, in --namespace")
	fs.StringVar(&o.DVCRTLSSecret, "dvcr-tls-secret", "dvcr-tls", "Secret with DVCR's CA (ca.crt), in --namespace")
	fs.StringVar(&o.DVCRAuthFile, "dvcr-auth-file", "", "DVCR's push credentials (.dockerconfigjson) for deleting images (required)")
	fs.StringVar(&o.DVCRCAFile, "dvcr-ca-file", "", "DVCR's CA (PEM) (required)")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", 2*time.Second, "how often a running import's progress is read into status")
	var cidrs string
	fs.StringVar(&cidrs, "virtual-machine-cidrs", "", "comma-separated IPv4 subnets the machines' addresses come from")
	fs.DurationVar(&o.LeaseRetention, "ip-lease-retention", 10*time.Minute, "how long a released VirtualMachineIPAddressLease is kept before it is deleted")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "port of the admission and conversion webhook server")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/etc/webhook/tls", "directory with the webhook server's tls.crt and tls.key")
	fs.StringVar(&o.WebhookService, "webhook-service", "virtualization-controller-webhook", "Service (in --namespace, port 443) in front of the webhook server")
	fs.StringVar(&o.WebhookCAFile, "webhook-ca-file", "", "CA (PEM) of the webhook server's certificate, the CRD conversion's caBundle; empty means ca.crt in --webhook-cert-dir")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", "virtualization-controller", "ValidatingWebhookConfiguration and MutatingWebhookConfiguration (of this one name) whose caBundle is set to the webhook CA")
	fs.DurationVar(&o.SourceInterval, "source-interval", 5*time.Second, "how often an image waiting for its source (an object not Ready yet, a missing pull secret) looks again")
	fs.DurationVar(&o.UploadTimeout, "upload-timeout", time.Hour, "how long an image or disk with an Upload source waits for the upload to begin, then Failed (WaitForUserUploadTimeout)")
	fs.StringVar((*string)(&o.UploadServiceType), "upload-service-type", string(corev1.ServiceTypeClusterIP), "type of an uploader's Service: ClusterIP, or NodePort (status.imageUploadURLs.external: the node port at the uploader's node)")
	fs.IntVar(&o.VMWorkers, "vm-workers", 4, "VirtualMachines reconciled at once")
	var gcSchedule string
	fs.StringVar(&gcSchedule, "dvcr-gc-schedule", "", "when DVCR's storage is garbage-collected (its pod restarted, once no import runs): a cron expression in UTC or @daily, @every 6h ...; empty: never on schedule")
	fs.StringVar(&o.DVCRDeployment, "dvcr-deployment", "dvcr", "DVCR's Deployment in --namespace, restarted for its garbage collection")
	o.Log.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	var gcErr error
	if gcSchedule != "" {
		if o.DVCRGCSchedule, gcErr = dvcrgc.ParseSchedule(gcSchedule); gcErr != nil {
			gcErr = fmt.Errorf("--dvcr-gc-schedule %q: %w", gcSchedule, gcErr)
		}
	}
	var cidrErr error
	if cidrs != "" {
		if o.VirtualMachineCIDRs, cidrErr = ipam.ParseRange(strings.Split(cidrs, ",")); cidrErr != nil {
			cidrErr = fmt.Errorf("--virtual-machine-cidrs: %w", cidrErr)
		}
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.WebhookCAFile == "" {
		o.WebhookCAFile = filepath.Join(o.WebhookCertDir, "ca.crt")
	}
	if o.LeaderElectionNamespace == "" {
		o.LeaderElectionNamespace = o.Namespace
	}
	return o, errors.Join(cidrErr, gcErr, o.validate())
}

func (o Options) validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace is required"))
	} else if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, msgs[0]))
	}
	if o.ImporterImage == "" {
		errs = append(errs, errors.New("--importer-image is required"))
	}
	if o.DVCRAddress == "" {
		errs = append(errs, errors.New("--dvcr-address is required"))
	} else if _, _, err := net.SplitHostPort(o.DVCRAddress); err != nil {
		errs = append(errs, fmt.Errorf("--dvcr-address %q: want host:port: %w", o.DVCRAddress, err))
	}
	if o.DVCRPullAddress == "" {
		errs = append(errs, errors.New("--dvcr-pull-address is required"))
	}
	if o.DVCRAuthFile == "" {
		errs = append(errs, errors.New("--dvcr-auth-file is required"))
	}
	if o.DVCRCAFile == "" {
		errs = append(errs, errors.New("--dvcr-ca-file is required"))
	}
	for flagName, name := range map[string]string{"--dvcr-pusher-secret": o.DVCRPusherSecret, "--dvcr-puller-secret": o.DVCRPullerSecret, "--dvcr-tls-secret": o.DVCRTLSSecret, "--dvcr-deployment": o.DVCRDeployment} {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", flagName, name, msgs[0]))
		}
	}
	for flagName, d := range map[string]time.Duration{"--progress-interval": o.ProgressInterval, "--source-interval": o.SourceInterval, "--upload-timeout": o.UploadTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: must be positive", flagName, d))
		}
	}
	if o.UploadServiceType != corev1.ServiceTypeClusterIP && o.UploadServiceType != corev1.ServiceTypeNodePort {
		errs = append(errs, fmt.Errorf("--upload-service-type %q: want ClusterIP or NodePort", o.UploadServiceType))
	}
	if o.VMWorkers < 1 {
		errs = append(errs, fmt.Errorf("--vm-workers %d: must be at least 1", o.VMWorkers))
	}
	if o.WebhookPort <= 0 || o.WebhookPort > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port %d: want 1 to 65535", o.WebhookPort))
	}
	if msgs := validation.IsDNS1035Label(o.WebhookService); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--webhook-service %q: %s", o.WebhookService, msgs[0]))
	}
	if msgs := validation.IsDNS1123Subdomain(o.WebhookConfiguration); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--webhook-configuration %q: %s", o.WebhookConfiguration, msgs[0]))
	}
	if o.LeaseRetention < 0 {
		errs = append(errs, fmt.Errorf("--ip-lease-retention %s: must not be negative", o.LeaseRetention))
	}
	if err := o.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
