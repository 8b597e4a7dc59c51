// Command kube-api-rewriter is the sidecar that lets KubeVirt-speaking components run against a
// cluster where the KubeVirt API exists only under renamed groups and kinds.
//
//	kube-api-rewriter [flags]                    run the proxy (api, webhook, metrics and health listeners)
//	kube-api-rewriter rename-crds FILE|- ...      print the renamed CRDs of KubeVirt-group CRD YAMLs
//
// Every flag can also be set through the environment: --api-listen is KUBE_API_REWRITER_API_LISTEN.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/kube-api-rewriter/pkg/certreload"
	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/proxy"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kube-api-rewriter/pkg/transport"
)

type config struct {
	rules           string
	kubeconfig      string
	apiListen       string
	webhookListen   string
	webhookTarget   string
	webhookTargetCA string
	webhookCert     string
	webhookKey      string
	metricsListen   string
	healthListen    string
	logLevel        string
	logFormat       string
	shutdownTimeout time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "rename-crds" {
		if err := renameCRDs(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "kube-api-rewriter rename-crds:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	fs := flag.NewFlagSet("kube-api-rewriter", flag.ExitOnError)
	fs.StringVar(&c.rules, "rules", "", "rules YAML file; empty means the embedded KubeVirt v1.6 rules")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the real apiserver; empty means KUBECONFIG or in-cluster config")
	fs.StringVar(&c.apiListen, "api-listen", "127.0.0.1:23915", "address of the api listener (plain HTTP: keep it on loopback)")
	fs.StringVar(&c.webhookListen, "webhook-listen", "", "address of the TLS webhook listener, e.g. :24192; empty disables it")
	fs.StringVar(&c.webhookTarget, "webhook-target", "https://127.0.0.1:9443", "URL of the component's webhook server")
	fs.StringVar(&c.webhookTargetCA, "webhook-target-ca", "", "CA bundle that signs the webhook server's certificate; empty trusts any certificate of a loopback target")
	fs.StringVar(&c.webhookCert, "webhook-cert", "/etc/kube-api-rewriter/webhook/tls.crt", "webhook listener certificate (reloaded when it changes)")
	fs.StringVar(&c.webhookKey, "webhook-key", "/etc/kube-api-rewriter/webhook/tls.key", "webhook listener key")
	fs.StringVar(&c.metricsListen, "metrics-listen", "127.0.0.1:9090", "address of the Prometheus /metrics listener; empty disables it")
	fs.StringVar(&c.healthListen, "health-listen", ":8082", "address of /healthz and /readyz; empty disables it")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error; debug logs a structural diff of each rewrite")
	fs.StringVar(&c.logFormat, "log-format", "json", "json or text")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long in-flight requests may take after SIGTERM")
	if err := parseFlags(fs, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kube-api-rewriter:", err)
		os.Exit(2)
	}
	log, err := newLogger(c.logLevel, c.logFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-api-rewriter:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, c, log); err != nil {
		log.Error("exiting", "err", err)
		os.Exit(1)
	}
}

// parseFlags applies KUBE_API_REWRITER_* environment variables, then the command line.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		env := "KUBE_API_REWRITER_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
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

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", format)
}

func loadRules(path string) (*rules.Rules, error) {
	if path == "" {
		return rules.Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--rules: %w", err)
	}
	r, err := rules.Load(data)
	if err != nil {
		return nil, fmt.Errorf("--rules %s: %w", path, err)
	}
	return r, nil
}

func upstreamConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		return clientcmd.BuildConfigFromFlags("", kc)
	}
	return rest.InClusterConfig()
}

func run(ctx context.Context, c config, log *slog.Logger) error {
	r, err := loadRules(c.rules)
	if err != nil {
		return err
	}
	rw := rewrite.New(r)
	up, err := upstreamConfig(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("upstream apiserver: %w", err)
	}
	upstreamURL, err := url.Parse(up.Host)
	if err != nil || upstreamURL.Host == "" {
		return fmt.Errorf("upstream apiserver address %q: %v", up.Host, err)
	}
	upstreamRT, err := rest.TransportFor(up)
	if err != nil {
		return fmt.Errorf("upstream transport: %w", err)
	}
	m := metrics.New()
	engine := transport.New(upstreamRT, transport.Options{Rewriter: rw, Metrics: m, Listener: "api", Log: log})

	// Cancelling the base context ends watches promptly on shutdown; clients re-watch elsewhere.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	servers := []*server{{name: "api", addr: c.apiListen, handler: proxy.NewAPI(upstreamURL, engine, log)}}

	var certs *certreload.Reloader
	if c.webhookListen != "" {
		if certs, err = certreload.New(c.webhookCert, c.webhookKey); err != nil {
			return fmt.Errorf("webhook certificate: %w", err)
		}
		target, err := url.Parse(c.webhookTarget)
		if err != nil {
			return fmt.Errorf("--webhook-target: %w", err)
		}
		client, err := webhookClient(target, c.webhookTargetCA)
		if err != nil {
			return err
		}
		servers = append(servers, &server{name: "webhook", addr: c.webhookListen,
			handler: &proxy.Webhook{Rewriter: rw, Target: target, Client: client, Metrics: m, Log: log},
			tls:     &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12}})
	}
	if c.metricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
		servers = append(servers, &server{name: "metrics", addr: c.metricsListen, handler: mux})
	}
	if c.healthListen != "" {
		servers = append(servers, &server{name: "health", addr: c.healthListen, handler: health(upstreamURL, upstreamRT, certs)})
	}

	errc := make(chan error, len(servers))
	for _, s := range servers {
		if err := s.start(base, errc); err != nil {
			return err
		}
		log.Info("listening", "listener", s.name, "addr", s.ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	log.Info("shutting down", "timeout", c.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	time.AfterFunc(time.Second, cancelBase)
	var errs []error
	for _, s := range servers {
		if err := s.srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			_ = s.srv.Close()
		}
	}
	return errors.Join(errs...)
}

type server struct {
	name    string
	addr    string
	handler http.Handler
	tls     *tls.Config
	ln      net.Listener
	srv     *http.Server
}

func (s *server) start(base context.Context, errc chan<- error) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("%s listener: %w", s.name, err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	go func() {
		var err error
		if s.tls != nil {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s listener: %w", s.name, err)
		}
	}()
	return nil
}

func webhookClient(target *url.URL, caFile string) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--webhook-target-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--webhook-target-ca %s: no certificate", caFile)
		}
		cfg.RootCAs = pool
	} else {
		// The webhook server shares the pod's loopback with us; only there is skipping the check
		// harmless.
		if ip := net.ParseIP(target.Hostname()); (ip == nil || !ip.IsLoopback()) && target.Hostname() != "localhost" {
			return nil, fmt.Errorf("--webhook-target %s is not on loopback: set --webhook-target-ca", target)
		}
		cfg.InsecureSkipVerify = true
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}, nil
}

// health serves /healthz (the process serves) and /readyz (the upstream apiserver answers its own
// /readyz through our credentials, and the webhook certificate loads).
func health(upstream *url.URL, rt http.RoundTripper, certs *certreload.Reloader) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if certs != nil {
			if err := certs.LastError(); err != nil {
				http.Error(w, "webhook certificate: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		u := *upstream
		u.Path = "/readyz"
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			http.Error(w, "upstream readyz: "+resp.Status, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}
