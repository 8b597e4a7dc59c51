// Command virt-api serves the core's aggregated API, subresources.kubevirt.io/v1, over TLS. It
// talks kubevirt.io through a kube-api-rewriter sidecar (its kubeconfig points at the sidecar) and
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

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtapi/subresources"
)

func main() {
	listen := flag.String("listen", ":8443", "address of the TLS listener the APIService points at")
	certFile := flag.String("tls-cert-file", "/etc/virt-api/certificates/tls.crt", "serving certificate")
	keyFile := flag.String("tls-key-file", "/etc/virt-api/certificates/tls.key", "serving key")
	// --kubeconfig (the rewriter sidecar's) comes with controller-runtime's config package.
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, log, *listen, *certFile, *keyFile); err != nil {
		log.Error("exiting", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, listen, certFile, keyFile string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
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
	auth, err := subresources.LoadRequestHeader(ctx, kube)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	srv := &http.Server{
		Addr:              listen,
		Handler:           (&subresources.Server{Client: c, Auth: auth, Authorizer: subresources.Authorizer{Kube: kube}, Log: log}).Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			ClientCAs: auth.ClientCAs, ClientAuth: tls.VerifyClientCertIfGiven,
		},
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	log.Info("serving subresources.kubevirt.io/v1", "addr", listen)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
