package app

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/d8virt/logopts"
)

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		check func(*Options) bool
		err   string // a part of the error; empty: valid
	}{
		{"defaults", []string{"--replica-name=virtualization-api-0"}, func(o *Options) bool {
			return o.SecureServing.BindPort == 8443 && o.MetricsBindAddress == "127.0.0.1:8080" &&
				o.PingInterval == 30*time.Second && o.Log == logopts.Default() && o.Kubeconfig == "" &&
				o.SessionsNamespace == "d8-virtualization" && o.SessionLeaseDuration == 30*time.Second
		}, ""},
		{"chart's flags", []string{"--secure-port=8443", "--tls-cert-file=/etc/tls/tls.crt", "--tls-private-key-file=/etc/tls/tls.key",
			"--metrics-bind-address=127.0.0.1:9090", "--stream-ping-interval=10s", "--log-format=text", "--log-level=debug",
			"--sessions-namespace=virt", "--replica-name=virtualization-api-7d9f-x2k", "--session-lease-duration=45s"},
			func(o *Options) bool {
				return o.SecureServing.ServerCert.CertKey.CertFile == "/etc/tls/tls.crt" && o.MetricsBindAddress == "127.0.0.1:9090" &&
					o.PingInterval == 10*time.Second && o.Log == logopts.Options{Level: "debug", Format: "text"} &&
					o.SessionsNamespace == "virt" && o.ReplicaName == "virtualization-api-7d9f-x2k" && o.SessionLeaseDuration == 45*time.Second
			}, ""},
		{"health open to all", []string{"--replica-name=r"}, func(o *Options) bool {
			return strings.Join(o.Authorization.AlwaysAllowPaths, ",") == "/healthz,/readyz,/livez"
		}, ""},
		{"bad metrics address", []string{"--metrics-bind-address=8080"}, nil, `--metrics-bind-address "8080": want host:port`},
		{"zero ping", []string{"--stream-ping-interval=0s"}, nil, "--stream-ping-interval 0s: must be positive"},
		{"negative grace", []string{"--stream-close-grace=-1s"}, nil, "--stream-close-grace -1s: must be positive"},
		{"bad level", []string{"--log-level=loud"}, nil, `--log-level "loud": want debug, info, warn or error`},
		{"bad format", []string{"--log-format=xml"}, nil, `--log-format "xml": want json or text`},
		{"bad port", []string{"--secure-port=70000"}, nil, "--secure-port 70000 must be between 1 and 65535"},
		{"no replica name", nil, nil, "--replica-name: required (the Pod's name)"},
		{"no sessions namespace", []string{"--sessions-namespace=", "--replica-name=r"}, nil, "--sessions-namespace: required"},
		{"short lease", []string{"--session-lease-duration=1s", "--replica-name=r"}, nil, "--session-lease-duration 1s: at least 3s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatalf("valid options: %v", err)
				}
				if !tc.check(o) {
					t.Errorf("options %+v", o)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}
