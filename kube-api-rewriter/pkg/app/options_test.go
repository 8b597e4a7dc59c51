package app

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

// failed checks err against want, the text an error must contain ("" when none is expected), and
// reports whether it was an error, expected or not: then the test case is over.
func failed(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatal(err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want one with %q", err, want)
	}
	return err != nil
}

// parse runs Parse over a fresh flag set bound to NewOptions, with env as the environment.
func parse(args []string, env map[string]string) (*Options, error) {
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	err := Parse(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return o, err
}

func TestParse(t *testing.T) {
	defaults := *NewOptions()
	with := func(f func(o *Options)) Options {
		o := defaults
		f(&o)
		return o
	}
	for _, c := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    Options
		wantErr string
	}{
		{name: "defaults", want: Options{
			APIListen: "127.0.0.1:23915", WebhookTarget: "https://127.0.0.1:9443",
			WebhookCert: "/etc/kube-api-rewriter/webhook/tls.crt", WebhookKey: "/etc/kube-api-rewriter/webhook/tls.key",
			MetricsListen: "127.0.0.1:9090", HealthListen: ":8082", LogLevel: "info", LogFormat: "json",
			ShutdownTimeout: 15 * time.Second,
		}},
		{name: "every flag", args: []string{
			"--rules", "r.yaml", "--kubeconfig", "kc", "--api-listen", ":1", "--webhook-listen", ":2",
			"--webhook-target", "https://localhost:3", "--webhook-target-ca", "ca.crt", "--webhook-cert", "c", "--webhook-key", "k",
			"--metrics-listen", ":4", "--health-listen", ":5", "--log-level", "debug", "--log-format", "text",
			"--shutdown-timeout", "3s",
		}, want: Options{
			Rules: "r.yaml", Kubeconfig: "kc", APIListen: ":1", WebhookListen: ":2", WebhookTarget: "https://localhost:3",
			WebhookTargetCA: "ca.crt", WebhookCert: "c", WebhookKey: "k", MetricsListen: ":4", HealthListen: ":5",
			LogLevel: "debug", LogFormat: "text", ShutdownTimeout: 3 * time.Second,
		}},
		{name: "every variable", env: map[string]string{
			"KUBE_API_REWRITER_RULES": "r.yaml", "KUBE_API_REWRITER_KUBECONFIG": "kc", "KUBE_API_REWRITER_API_LISTEN": ":1",
			"KUBE_API_REWRITER_WEBHOOK_LISTEN": ":2", "KUBE_API_REWRITER_WEBHOOK_TARGET": "https://localhost:3",
			"KUBE_API_REWRITER_WEBHOOK_TARGET_CA": "ca.crt", "KUBE_API_REWRITER_WEBHOOK_CERT": "c", "KUBE_API_REWRITER_WEBHOOK_KEY": "k",
			"KUBE_API_REWRITER_METRICS_LISTEN": ":4", "KUBE_API_REWRITER_HEALTH_LISTEN": ":5", "KUBE_API_REWRITER_LOG_LEVEL": "debug",
			"KUBE_API_REWRITER_LOG_FORMAT": "text", "KUBE_API_REWRITER_SHUTDOWN_TIMEOUT": "3s",
		}, want: Options{
			Rules: "r.yaml", Kubeconfig: "kc", APIListen: ":1", WebhookListen: ":2", WebhookTarget: "https://localhost:3",
			WebhookTargetCA: "ca.crt", WebhookCert: "c", WebhookKey: "k", MetricsListen: ":4", HealthListen: ":5",
			LogLevel: "debug", LogFormat: "text", ShutdownTimeout: 3 * time.Second,
		}},
		{name: "an empty variable disables a listener", env: map[string]string{"KUBE_API_REWRITER_METRICS_LISTEN": ""},
			want: with(func(o *Options) { o.MetricsListen = "" })},
		{name: "an empty flag disables a listener", args: []string{"--health-listen", ""},
			want: with(func(o *Options) { o.HealthListen = "" })},
		{name: "the command line wins over the environment", args: []string{"--api-listen=:7"},
			env:  map[string]string{"KUBE_API_REWRITER_API_LISTEN": ":6", "KUBE_API_REWRITER_LOG_LEVEL": "warn"},
			want: with(func(o *Options) { o.APIListen, o.LogLevel = ":7", "warn" })},
		{name: "unrelated variables are ignored", env: map[string]string{"KUBECONFIG": "x", "KUBE_API_REWRITER_NOPE": "y"},
			want: defaults},
		{name: "bad duration in the environment", env: map[string]string{"KUBE_API_REWRITER_SHUTDOWN_TIMEOUT": "soon"},
			wantErr: "KUBE_API_REWRITER_SHUTDOWN_TIMEOUT: parse error"},
		{name: "bad duration on the command line", args: []string{"--shutdown-timeout", "soon"},
			wantErr: `invalid value "soon" for flag -shutdown-timeout`},
		{name: "unknown flag", args: []string{"--listen", ":1"}, wantErr: "flag provided but not defined: -listen"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parse(c.args, c.env)
			if failed(t, err, c.wantErr) {
				return
			}
			if *got != c.want {
				t.Errorf("got  %+v\nwant %+v", *got, c.want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"api-listen":        "KUBE_API_REWRITER_API_LISTEN",
		"webhook-target-ca": "KUBE_API_REWRITER_WEBHOOK_TARGET_CA",
		"rules":             "KUBE_API_REWRITER_RULES",
	} {
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", flagName, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name, level, format string
		wantErr             string
	}{
		{"defaults", "info", "json", ""},
		{"debug text", "debug", "text", ""},
		{"upper case level", "WARN", "json", ""},
		{"level with offset", "error+2", "json", ""},
		{"bad level", "loud", "json", `--log-level: slog: level string "loud": unknown name`},
		{"empty level", "", "json", "--log-level: "},
		{"bad format", "info", "yaml", `--log-format "yaml": want json or text`},
		{"empty format", "info", "", `--log-format "": want json or text`},
		{"the level is checked first", "loud", "yaml", "--log-level: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := NewOptions()
			o.LogLevel, o.LogFormat = c.level, c.format
			err := o.Validate()
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
			if _, lerr := o.Logger(io.Discard); lerr == nil || lerr.Error() != err.Error() {
				t.Errorf("Logger error %v, want the Validate error %v", lerr, err)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	for _, c := range []struct {
		name, level, format string
		want, notWant       string
	}{
		{"json", "info", "json", `"msg":"shown"`, "hidden"},
		{"text", "info", "text", "msg=shown", "hidden"},
		{"debug shows debug", "debug", "text", "msg=hidden", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := NewOptions()
			o.LogLevel, o.LogFormat = c.level, c.format
			var buf bytes.Buffer
			log, err := o.Logger(&buf)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("hidden")
			log.Info("shown")
			if !strings.Contains(buf.String(), c.want) || (c.notWant != "" && strings.Contains(buf.String(), c.notWant)) {
				t.Errorf("log %q: want %q and not %q", buf.String(), c.want, c.notWant)
			}
		})
	}
}

// Main's exit codes for what fails before the proxy starts.
func TestMainExitCodes(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		env    map[string]string
		code   int
		stderr string
	}{
		{"rename-crds without a file", []string{"rename-crds"}, nil, 1, "kube-api-rewriter rename-crds: usage: "},
		{"bad variable", nil, map[string]string{"KUBE_API_REWRITER_SHUTDOWN_TIMEOUT": "soon"}, 2,
			"kube-api-rewriter: KUBE_API_REWRITER_SHUTDOWN_TIMEOUT: parse error\n"},
		{"bad log level", []string{"--log-level", "loud"}, nil, 2, "kube-api-rewriter: --log-level: "},
		{"bad log format", nil, map[string]string{"KUBE_API_REWRITER_LOG_FORMAT": "yaml"}, 2,
			"kube-api-rewriter: --log-format \"yaml\": want json or text\n"},
		{"bad rules", []string{"--rules", "/nonexistent/rules.yaml", "--log-format", "text"}, nil, 1,
			"level=ERROR msg=exiting err=\"--rules: open /nonexistent/rules.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := Main(c.args, strings.NewReader(""), &stdout, &stderr); code != c.code {
				t.Errorf("exit code %d, want %d", code, c.code)
			}
			if !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), c.stderr)
			}
		})
	}
}
