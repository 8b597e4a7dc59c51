package app

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/logopts"
)

func TestParseOptions(t *testing.T) {
	required := []string{"--namespace=d8-virtualization", "--importer-image=importer:1", "--dvcr-address=dvcr.d8-virtualization.svc:5000", "--dvcr-pull-address=dvcr.d8-virtualization.svc", "--dvcr-auth-file=/a", "--dvcr-ca-file=/c"}
	cases := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o Options)
	}{
		{name: "defaults", args: required, check: func(t *testing.T, o Options) {
			if !o.LeaderElect || o.LeaderElectionNamespace != "d8-virtualization" || o.MetricsBindAddress != "127.0.0.1:8080" ||
				o.HealthProbeBindAddress != ":8081" || o.DVCRPusherSecret != "dvcr-pusher" || o.DVCRPullerSecret != "dvcr-puller" || o.DVCRTLSSecret != "dvcr-tls" ||
				o.ProgressInterval != 2*time.Second || o.SourceInterval != 5*time.Second || o.UploadTimeout != time.Hour || o.Log != logopts.Default() || o.VMWorkers != 4 || o.UploadServiceType != "ClusterIP" {
				t.Errorf("defaults: %+v", o)
			}
		}},
		{name: "leader namespace given", args: append(required, "--leader-election-namespace=other", "--leader-elect=false"), check: func(t *testing.T, o Options) {
			if o.LeaderElect || o.LeaderElectionNamespace != "other" {
				t.Errorf("%+v", o)
			}
		}},
		{name: "nothing", args: nil, wantErr: "--namespace is required"},
		{name: "no importer image", args: []string{"--namespace=ns", "--dvcr-address=d:5000", "--dvcr-pull-address=d", "--dvcr-auth-file=/a", "--dvcr-ca-file=/c"}, wantErr: "--importer-image is required"},
		{name: "no dvcr", args: []string{"--namespace=ns", "--importer-image=i"}, wantErr: "--dvcr-address is required"},
		{name: "no dvcr pull address", args: []string{"--namespace=ns", "--importer-image=i", "--dvcr-address=d:1"}, wantErr: "--dvcr-pull-address is required"},
		{name: "no dvcr files", args: []string{"--namespace=ns", "--importer-image=i", "--dvcr-address=d:1", "--dvcr-pull-address=d"}, wantErr: "--dvcr-auth-file is required\n--dvcr-ca-file is required"},
		{name: "dvcr without port", args: []string{"--namespace=ns", "--importer-image=i", "--dvcr-address=dvcr"}, wantErr: `--dvcr-address "dvcr": want host:port`},
		{name: "bad namespace", args: []string{"--namespace=Bad_NS", "--importer-image=i", "--dvcr-address=d:1"}, wantErr: `--namespace "Bad_NS"`},
		{name: "bad secret", args: append(required, "--dvcr-tls-secret=No!"), wantErr: `--dvcr-tls-secret "No!"`},
		{name: "zero interval", args: append(required, "--progress-interval=0s"), wantErr: "--progress-interval 0s: must be positive"},
		{name: "negative source interval", args: append(required, "--source-interval=-1s"), wantErr: "--source-interval -1s: must be positive"},
		{name: "vm workers", args: append(required, "--vm-workers=8"), check: func(t *testing.T, o Options) {
			if o.VMWorkers != 8 {
				t.Errorf("vm workers %d", o.VMWorkers)
			}
		}},
		{name: "no vm workers", args: append(required, "--vm-workers=0"), wantErr: "--vm-workers 0: must be at least 1"},
		{name: "zero upload timeout", args: append(required, "--upload-timeout=0s"), wantErr: "--upload-timeout 0s: must be positive"},
		{name: "an upload service type of NodePort", args: append(required, "--upload-service-type=NodePort"), check: func(t *testing.T, o Options) {
			if o.UploadServiceType != "NodePort" {
				t.Errorf("upload service type %q", o.UploadServiceType)
			}
		}},
		{name: "no gc schedule", args: required, check: func(t *testing.T, o Options) {
			if o.DVCRGCSchedule != nil || o.DVCRDeployment != "dvcr" {
				t.Errorf("gc schedule %v, deployment %q", o.DVCRGCSchedule, o.DVCRDeployment)
			}
		}},
		{name: "a gc schedule", args: append(required, "--dvcr-gc-schedule=0 2 * * *", "--dvcr-deployment=registry"), check: func(t *testing.T, o Options) {
			if o.DVCRGCSchedule == nil || o.DVCRDeployment != "registry" {
				t.Fatalf("gc schedule %v, deployment %q", o.DVCRGCSchedule, o.DVCRDeployment)
			}
			from := time.Date(2026, 12, 4, 19, 0, 0, 0, time.UTC)
			if next := o.DVCRGCSchedule.Next(from); !next.Equal(time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)) {
				t.Errorf("next collection %s", next)
			}
		}},
		{name: "a bad gc schedule", args: append(required, "--dvcr-gc-schedule=at two"), wantErr: `--dvcr-gc-schedule "at two"`},
		{name: "a bad dvcr deployment", args: append(required, "--dvcr-deployment=DVCR"), wantErr: `--dvcr-deployment "DVCR"`},
		{name: "a bad upload service type", args: append(required, "--upload-service-type=LoadBalancer"), wantErr: `--upload-service-type "LoadBalancer": want ClusterIP or NodePort`},
		{name: "log options", args: append(required, "--log-level=debug", "--log-format=text"), check: func(t *testing.T, o Options) {
			if o.Log != (logopts.Options{Level: "debug", Format: "text"}) {
				t.Errorf("log %+v", o.Log)
			}
		}},
		{name: "bad level", args: append(required, "--log-level=loud"), wantErr: `--log-level "loud": want debug, info, warn or error`},
		{name: "bad format", args: append(required, "--log-format=console"), wantErr: `--log-format "console": want json or text`},
		{name: "cidrs", args: append(required, "--virtual-machine-cidrs=10.66.10.0/24,10.66.20.0/24", "--ip-lease-retention=1m"), check: func(t *testing.T, o Options) {
			if o.VirtualMachineCIDRs.String() != "10.66.10.0/24,10.66.20.0/24" || o.LeaseRetention != time.Minute {
				t.Errorf("cidrs %s, retention %s", o.VirtualMachineCIDRs, o.LeaseRetention)
			}
		}},
		{name: "bad cidr", args: append(required, "--virtual-machine-cidrs=10.66.10.1/24"), wantErr: `--virtual-machine-cidrs: CIDR "10.66.10.1/24": host bits are set`},
		{name: "negative retention", args: append(required, "--ip-lease-retention=-1s"), wantErr: "--ip-lease-retention -1s: must not be negative"},
		{name: "unknown flag", args: append(required, "--nope"), wantErr: "flag provided but not defined: -nope"},
		{name: "extra argument", args: append(required, "extra"), wantErr: `unexpected arguments: ["extra"]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseOptions(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}
