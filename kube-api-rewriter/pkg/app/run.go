package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
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

// Proxy is what Complete makes of the options: the rules loaded, the upstream apiserver set up
// and the handler of every listener built. Nothing listens before Run.
type Proxy struct {
	log             *slog.Logger
	servers         []*server
	shutdownTimeout time.Duration
}

// Complete loads what the options name and builds the listeners' handlers.
func (o *Options) Complete(log *slog.Logger) (*Proxy, error) {
	r, err := loadRules(o.Rules)
	if err != nil {
		return nil, err
	}
	rw := rewrite.New(r)
	up, err := upstreamConfig(o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("upstream apiserver: %w", err)
	}
	upstreamURL, upstreamRT, err := proxy.Upstream(up)
	if err != nil {
		return nil, err
	}
	m := metrics.New()
	engine := transport.New(upstreamRT, transport.Options{Rewriter: rw, Metrics: m, Listener: "api", Log: log})
	p := &Proxy{log: log, shutdownTimeout: o.ShutdownTimeout,
		servers: []*server{{name: "api", addr: o.APIListen, handler: proxy.NewAPI(upstreamURL, engine, log)}}}

	var certs *certreload.Reloader
	if o.WebhookListen != "" {
		if certs, err = certreload.New(o.WebhookCert, o.WebhookKey); err != nil {
			return nil, fmt.Errorf("webhook certificate: %w", err)
		}
		target, err := url.Parse(o.WebhookTarget)
		if err != nil {
			return nil, fmt.Errorf("--webhook-target: %w", err)
		}
		client, err := webhookClient(target, o.WebhookTargetCA)
		if err != nil {
			return nil, err
		}
		p.servers = append(p.servers, &server{name: "webhook", addr: o.WebhookListen,
			handler: &proxy.Webhook{Rewriter: rw, Target: target, Client: client, Metrics: m, Log: log},
			tls:     &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12}})
	}
	if o.MetricsListen != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
		p.servers = append(p.servers, &server{name: "metrics", addr: o.MetricsListen, handler: mux})
	}
	if o.HealthListen != "" {
		p.servers = append(p.servers, &server{name: "health", addr: o.HealthListen, handler: health(upstreamURL, upstreamRT, certs)})
	}
	return p, nil
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

// Run opens every listener and serves until ctx ends or a listener fails, then shuts the servers
// down, giving in-flight requests the shutdown timeout.
func (p *Proxy) Run(ctx context.Context) error {
	// Cancelling the base context ends watches promptly on shutdown; clients re-watch elsewhere.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	errc := make(chan error, len(p.servers))
	for _, s := range p.servers {
		if err := s.start(base, errc); err != nil {
			return err
		}
		p.log.Info("listening", "listener", s.name, "addr", s.ln.Addr().String())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	p.log.Info("shutting down", "timeout", p.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), p.shutdownTimeout)
	defer cancel()
	time.AfterFunc(time.Second, cancelBase)
	var errs []error
	for _, s := range p.servers {
		if err := s.srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			_ = s.srv.Close()
		}
	}
	return errors.Join(errs...)
}

// server is one listener of the proxy.
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
