// Package app is virtualization-api's command: its options and the server they build.
package app

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	genericoptions "k8s.io/apiserver/pkg/server/options"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-api/pkg/sessions"
)

// Options are the command's flags.
type Options struct {
	SecureServing  *genericoptions.SecureServingOptionsWithLoopback
	Authentication *genericoptions.DelegatingAuthenticationOptions
	Authorization  *genericoptions.DelegatingAuthorizationOptions

	// Kubeconfig is the identity virtualization-api reads VMs and calls the core's virt-api
	// with; empty means the Pod's ServiceAccount.
	Kubeconfig string
	// MetricsBindAddress serves /metrics in plain HTTP (behind kube-rbac-proxy in the chart).
	MetricsBindAddress string
	// PingInterval is the keep-alive of each leg of a stream; CloseGrace how long the second
	// side of a stream has to answer a close.
	PingInterval time.Duration
	CloseGrace   time.Duration
	// SessionsNamespace holds the Leases of the open console and VNC sessions (virtualization-api's
	// own namespace), shared by every replica; ReplicaName names this replica in them (its Pod);
	// SessionLeaseDuration is how long a session of a replica that died keeps its slot.
	SessionsNamespace    string
	ReplicaName          string
	SessionLeaseDuration time.Duration
	// Log is the log's level and format (--log-level, --log-format).
	Log logopts.Options
}

// NewOptions are the defaults: the serving port 8443 with a certificate from
// --tls-cert-file/--tls-private-key-file (a self-signed one in --cert-dir otherwise), the
// cluster's authentication and authorization, health probes open to all.
func NewOptions() *Options {
	o := &Options{
		SecureServing:        genericoptions.NewSecureServingOptions().WithLoopback(),
		Authentication:       genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:        genericoptions.NewDelegatingAuthorizationOptions(),
		MetricsBindAddress:   "127.0.0.1:8080",
		PingInterval:         30 * time.Second,
		CloseGrace:           5 * time.Second,
		SessionsNamespace:    "d8-virtualization",
		SessionLeaseDuration: sessions.DefaultDuration,
		Log:                  logopts.Default(),
	}
	o.SecureServing.BindPort = 8443
	o.SecureServing.ServerCert.CertDirectory = "/tmp/virtualization-api"
	o.SecureServing.ServerCert.PairName = "virtualization-api"
	o.Authorization.AlwaysAllowPaths = []string{"/healthz", "/readyz", "/livez"}
	return o
}

// AddFlags adds the flags to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.SecureServing.AddFlags(fs)
	o.Authentication.AddFlags(fs)
	o.Authorization.AddFlags(fs)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of virtualization-api's own identity (reads VMs, calls the core's virt-api); empty means the Pod's ServiceAccount")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "address of the plain-HTTP /metrics listener (kube-rbac-proxy's upstream)")
	fs.DurationVar(&o.PingInterval, "stream-ping-interval", o.PingInterval, "keep-alive ping interval of each leg of a stream; three unanswered ones end it")
	fs.DurationVar(&o.CloseGrace, "stream-close-grace", o.CloseGrace, "how long the second side of a stream has to answer a close passed on to it")
	fs.StringVar(&o.SessionsNamespace, "sessions-namespace", o.SessionsNamespace, "namespace of the Leases that hold the open console and VNC sessions, shared by every replica (virtualization-api's own)")
	fs.StringVar(&o.ReplicaName, "replica-name", o.ReplicaName, "this replica's name in the sessions' Leases (its Pod's name)")
	fs.DurationVar(&o.SessionLeaseDuration, "session-lease-duration", o.SessionLeaseDuration, "how long a session's Lease outlives its last renewal: how long the session of a replica that died keeps its slot")
	o.Log.Bind(fs)
}

// Validate checks the options; the error names every bad flag.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.SecureServing.Validate()...)
	errs = append(errs, o.Authentication.Validate()...)
	errs = append(errs, o.Authorization.Validate()...)
	if _, _, err := net.SplitHostPort(o.MetricsBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--metrics-bind-address %q: want host:port: %w", o.MetricsBindAddress, err))
	}
	if o.PingInterval <= 0 {
		errs = append(errs, fmt.Errorf("--stream-ping-interval %s: must be positive", o.PingInterval))
	}
	if o.CloseGrace <= 0 {
		errs = append(errs, fmt.Errorf("--stream-close-grace %s: must be positive", o.CloseGrace))
	}
	if o.SessionsNamespace == "" {
		errs = append(errs, errors.New("--sessions-namespace: required"))
	}
	if o.ReplicaName == "" {
		errs = append(errs, errors.New("--replica-name: required (the Pod's name)"))
	}
	if o.SessionLeaseDuration < 3*time.Second {
		errs = append(errs, fmt.Errorf("--session-lease-duration %s: at least 3s (it is renewed every third of it)", o.SessionLeaseDuration))
	}
	if err := o.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
