// Package app is the kube-api-rewriter command: its options (flags, and the environment variables
// that stand for them), the listeners it serves and its shutdown. The main package only hands it
// the process's arguments and standard streams.
package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// EnvPrefix starts the environment variable of every flag: --api-listen is
// KUBE_API_REWRITER_API_LISTEN.
const EnvPrefix = "KUBE_API_REWRITER_"

// Options are the settings of the proxy, one field a flag.
type Options struct {
	Rules           string
	Kubeconfig      string
	APIListen       string
	WebhookListen   string
	WebhookTarget   string
	WebhookTargetCA string
	WebhookCert     string
	WebhookKey      string
	MetricsListen   string
	HealthListen    string
	LogLevel        string
	LogFormat       string
	ShutdownTimeout time.Duration
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		APIListen:       "127.0.0.1:23915",
		WebhookTarget:   "https://127.0.0.1:9443",
		WebhookCert:     "/etc/kube-api-rewriter/webhook/tls.crt",
		WebhookKey:      "/etc/kube-api-rewriter/webhook/tls.key",
		MetricsListen:   "127.0.0.1:9090",
		HealthListen:    ":8082",
		LogLevel:        "info",
		LogFormat:       "json",
		ShutdownTimeout: 15 * time.Second,
	}
}

// AddFlags binds every option to its flag in fs; the current values are the flags' defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Rules, "rules", o.Rules, "rules YAML file; empty means the embedded KubeVirt v1.6 rules")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the real apiserver; empty means KUBECONFIG or in-cluster config")
	fs.StringVar(&o.APIListen, "api-listen", o.APIListen, "address of the api listener (plain HTTP: keep it on loopback)")
	fs.StringVar(&o.WebhookListen, "webhook-listen", o.WebhookListen, "address of the TLS webhook listener, e.g. :24192; empty disables it")
	fs.StringVar(&o.WebhookTarget, "webhook-target", o.WebhookTarget, "URL of the component's webhook server")
	fs.StringVar(&o.WebhookTargetCA, "webhook-target-ca", o.WebhookTargetCA, "CA bundle that signs the webhook server's certificate; empty trusts any certificate of a loopback target")
	fs.StringVar(&o.WebhookCert, "webhook-cert", o.WebhookCert, "webhook listener certificate (reloaded when it changes)")
	fs.StringVar(&o.WebhookKey, "webhook-key", o.WebhookKey, "webhook listener key")
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "address of the Prometheus /metrics listener; empty disables it")
	fs.StringVar(&o.HealthListen, "health-listen", o.HealthListen, "address of /healthz and /readyz; empty disables it")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error; debug logs a structural diff of each rewrite")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "json or text")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight requests may take after SIGTERM")
}

// EnvName is the environment variable that sets the flag name.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse sets the flags of fs from the environment (lookupEnv, os.LookupEnv in the command), then
// from args: the command line wins. An environment value a flag does not accept is an error that
// names the variable; what fs.Parse does with a bad argument is up to fs's ErrorHandling.
func Parse(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := EnvName(f.Name)
		if v, ok := lookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return fs.Parse(args)
}

// Validate checks the options that need nothing but themselves: the logging ones. (What needs
// files or the network, such as the rules, the kubeconfig or the webhook target, Complete checks.)
func (o *Options) Validate() error {
	if _, err := o.logLevel(); err != nil {
		return err
	}
	switch o.LogFormat {
	case "json", "text":
		return nil
	}
	return fmt.Errorf("--log-format %q: want json or text", o.LogFormat)
}

func (o *Options) logLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return l, fmt.Errorf("--log-level: %w", err)
	}
	return l, nil
}

// Logger returns the logger the options ask for, writing to w.
func (o *Options) Logger(w io.Writer) (*slog.Logger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	l, _ := o.logLevel()
	opts := &slog.HandlerOptions{Level: l}
	if o.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}
