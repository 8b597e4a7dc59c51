// Command virt-api serves the core's aggregated API, subresources.kubevirt.io/v1, over TLS, and
// its admission webhooks on a second TLS listener that only the rewriter sidecar's webhook
// listener calls (it restores the renamed kinds to kubevirt.io first). It talks kubevirt.io through a kube-api-rewriter sidecar (its kubeconfig points at the sidecar) and
// trusts only the apiserver's front proxy, whose CA it reads from the cluster.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/buildinfo"
	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	"github.com/d8virt/kubevirt-core/pkg/mtls"
	"github.com/d8virt/kubevirt-core/pkg/virtapi/apimetrics"
	"github.com/d8virt/kubevirt-core/pkg/virtapi/subresources"
	"github.com/d8virt/kubevirt-core/pkg/virtapi/webhooks"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
	"github.com/d8virt/logopts"
)

func main() {
	listen := flag.String("listen", ":8443", "address of the TLS listener the APIService points at")
	certFile := flag.String("tls-cert-file", "/etc/virt-api/certificates/tls.crt", "serving certificate")
	keyFile := flag.String("tls-key-file", "/etc/virt-api/certificates/tls.key", "serving key")
	webhookListen := flag.String("webhook-listen", "127.0.0.1:9443", "address of the admission webhook TLS listener, for the rewriter sidecar; empty disables it")
	handlerPort := flag.Int("handler-port", 8186, "port of virt-handler's API on the handler Pods")
	handlerCA := flag.String("handler-ca-file", "", "CA of the virt-handler serving certificates; empty disables node commands (503)")
	handlerCert := flag.String("handler-client-cert-file", "", "client certificate virt-api presents to virt-handler")
	handlerKey := flag.String("handler-client-key-file", "", "key of the handler client certificate")
	metricsAddr := flag.String("metrics-bind-address", "127.0.0.1:8080", "Prometheus metrics (served behind kube-rbac-proxy); empty or 0 disables")
	namespace := flag.String("namespace", "", "the core's namespace: its ServiceAccounts (kubevirt-controller, kubevirt-handler, kubevirt-apiserver) may change a VMI's spec, nobody else")
	// --kubeconfig (the rewriter sidecar's) comes with controller-runtime's config package.
	logOpts := logopts.Default()
	logOpts.Bind(flag.CommandLine)
	flag.Parse()
	h, err := logOpts.Handler(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "virt-api:", err)
		os.Exit(2)
	}
	log := slog.New(h)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *namespace == "" {
		log.Error("exiting", "err", "--namespace is required: the core's namespace, whose ServiceAccounts may change VMI specs")
		os.Exit(2)
	}
	hooks := webhookConfig{listen: *webhookListen, systemUsers: virtapicontract.SystemUsers(*namespace)}
	nodes := nodeConfig{port: *handlerPort, caFile: *handlerCA, certFile: *handlerCert, keyFile: *handlerKey}
	if err := run(ctx, log, *listen, *certFile, *keyFile, *metricsAddr, hooks, nodes); err != nil {
		log.Error("exiting", "err", err)
		os.Exit(1)
	}
}

type nodeConfig struct {
	port                      int
	caFile, certFile, keyFile string
}

// proxy is the link to the handlers, nil when none is configured.
func (n nodeConfig) proxy(c client.Reader) (*subresources.NodeProxy, error) {
	if n.caFile == "" {
		return nil, nil
	}
	t, err := mtls.Client(n.certFile, n.keyFile, n.caFile)
	if err != nil {
		return nil, fmt.Errorf("virt-handler link: %w", err)
	}
	return &subresources.NodeProxy{Client: c, Port: n.port, TLS: t}, nil
}

type webhookConfig struct {
	listen      string
	systemUsers map[string]bool
}

func run(ctx context.Context, log *slog.Logger, listen, certFile, keyFile, metricsAddr string, hooks webhookConfig, nodes nodeConfig) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme, err := corescheme.New()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	auth, err := loadRequestHeader(ctx, log, kube, requestHeaderWait)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	proxy, err := nodes.proxy(c)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := apimetrics.New(reg)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	api := (&subresources.Server{
		Client: c, Auth: auth, Authorizer: subresources.Authorizer{Kube: kube}, Nodes: proxy, Log: log,
		Info: subresources.Info{Build: buildinfo.Get(), Kube: kube.Discovery()},
	}).Handler()
	srv := &http.Server{
		Addr:              listen,
		Handler:           metrics.Instrument("subresources", apimetrics.SubresourceRoute, api),
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			ClientCAs: auth.ClientCAs, ClientAuth: tls.VerifyClientCertIfGiven,
		},
	}
	servers := []*http.Server{srv}
	if hooks.listen != "" {
		// The webhook listener sees only the sidecar, which does not present a client
		// certificate; it is meant for loopback.
		decided := func(path string, allowed bool) {
			decision := "denied"
			if allowed {
				decision = "allowed"
			}
			metrics.Admissions.WithLabelValues(path, decision).Inc()
		}
		hookServer := &webhooks.Server{Reader: c, SystemUsers: hooks.systemUsers, Log: log.With("server", "webhooks"), Decided: decided}
		servers = append(servers, &http.Server{
			Addr:              hooks.listen,
			Handler:           metrics.Instrument("webhooks", apimetrics.WebhookRoute(virtapicontract.WebhookPaths...), hookServer.Handler()),
			ReadHeaderTimeout: 30 * time.Second,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		})
	}
	errc := make(chan error, len(servers)+1)
	for _, s := range servers {
		go func() { errc <- fmt.Errorf("serve %s: %w", s.Addr, s.ListenAndServeTLS("", "")) }()
	}
	if metricsAddr != "" && metricsAddr != "0" {
		// Plain HTTP on loopback: kube-rbac-proxy fronts it, as for the other components.
		m := &http.Server{Addr: metricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 30 * time.Second}
		go func() { errc <- fmt.Errorf("serve metrics %s: %w", m.Addr, m.ListenAndServe()) }()
		servers = append(servers, m)
	}
	log.Info("serving subresources.kubevirt.io", "versions", virtapicontract.SubresourcesVersions, "addr", listen, "webhooks", hooks.listen, "version", buildinfo.Get().GitVersion)
	var runErr error
	select {
	case runErr = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
			runErr = fmt.Errorf("shutdown %s: %w", s.Addr, err)
		}
	}
	return runErr
}

// requestHeaderWait is how long virt-api retries its first read: its kubeconfig points at the
// rewriter sidecar, and the containers of a pod start in no set order.
const requestHeaderWait = 30 * time.Second

// loadRequestHeader reads the front-proxy settings, retrying every second for up to wait while
// the read fails (typically: the sidecar does not listen yet).
func loadRequestHeader(ctx context.Context, log *slog.Logger, kube kubernetes.Interface, wait time.Duration) (*subresources.RequestHeader, error) {
	deadline := time.Now().Add(wait)
	for {
		auth, err := subresources.LoadRequestHeader(ctx, kube)
		if err == nil || time.Now().After(deadline) {
			return auth, err
		}
		log.Info("waiting for the apiserver", "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}
