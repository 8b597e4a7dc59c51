// Command prometheus-sd keeps the local Prometheus' targets current: it watches the EndpointSlices,
// Services and Pods of the namespaces its scrape configuration reads and rewrites their file_sd
// files when they change (scrapeconfig.Follow), as the Kubernetes service discovery Debian's
// Prometheus lacks would. `devcluster prometheus up` runs it next to Prometheus, with Prometheus'
// own account.
//
//	prometheus-sd --kubeconfig FILE --targets-dir DIR --namespaces-file FILE [--settle 500ms] [--log-level info]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/prometheus/scrapeconfig"
	"github.com/d8virt/logopts"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus-sd:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of Prometheus' account (required)")
	dir := flag.String("targets-dir", "", "directory of the file_sd files, one per namespace (required)")
	nsFile := flag.String("namespaces-file", "", "file with the namespaces to follow, one per line (required)")
	settle := flag.Duration("settle", 500*time.Millisecond, "how long a burst of changes settles before the files are written")
	log := logopts.Options{Level: "info", Format: "text"}
	log.Bind(flag.CommandLine)
	flag.Parse()
	handler, err := log.Handler(os.Stderr)
	if err != nil {
		return err
	}
	if *kubeconfig == "" || *dir == "" || *nsFile == "" {
		return errors.New("--kubeconfig, --targets-dir and --namespaces-file are required")
	}
	data, err := os.ReadFile(*nsFile)
	if err != nil {
		return fmt.Errorf("--namespaces-file: %w", err)
	}
	namespaces := strings.Fields(string(data))
	if len(namespaces) == 0 {
		return fmt.Errorf("--namespaces-file %s names no namespace", *nsFile)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", *kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l := slog.New(handler)
	l.Info("following the targets", "namespaces", namespaces, "dir", *dir)
	return scrapeconfig.Follow(ctx, kube, namespaces, *dir, *settle, l)
}
