package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/prometheus"
)

// prometheusDir keeps Prometheus' configuration, token, targets and TSDB; its file addr (the
// listen address) marks a stack that runs Prometheus, so that up, down and status see it.
func prometheusDir(s *controlplane.Stack) string {
	return filepath.Join(s.Config().StateDir, "prometheus")
}

func prometheusAddrFile(s *controlplane.Stack) string { return filepath.Join(prometheusDir(s), "addr") }

// withPrometheus adds the Prometheus of a stack that runs one, and its targets' follower.
func withPrometheus(s *controlplane.Stack, binDir string) error {
	b, err := os.ReadFile(prometheusAddrFile(s))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	srv, err := prometheus.New(prometheusDir(s), strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	sd, err := daemonBinary(binDir, prometheus.SDDaemon)
	if err != nil {
		return err
	}
	s.AddComponents(srv.SDComponent(sd), srv.Component())
	return nil
}

// prometheusUp (re)starts Prometheus on the stack with a configuration generated from the
// module's ServiceMonitors, and prometheus-sd, which keeps its targets current, and prints its
// URL last.
func prometheusUp(ctx context.Context, s *controlplane.Stack, binDir string, portBase int, args []string) error {
	fs := flag.NewFlagSet("prometheus up", flag.ExitOnError)
	addr := fs.String("addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(portBase+20)), "listen address")
	_ = fs.Parse(args)
	sd, err := daemonBinary(binDir, prometheus.SDDaemon)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(prometheusAddrFile(s)); err == nil {
		// A fresh configuration needs a fresh start: Prometheus reads it once.
		srv, err := prometheus.New(prometheusDir(s), strings.TrimSpace(string(old)))
		if err != nil {
			return err
		}
		if err := s.StopComponent(srv.Component(), 15*time.Second); err != nil {
			return err
		}
		if err := s.StopComponent(srv.SDComponent(sd), 15*time.Second); err != nil {
			return err
		}
	}
	run := prometheus.OnStack{Stack: s, ModuleNamespace: module.Namespace, Dir: prometheusDir(s), Addr: *addr,
		ScrapeInterval: "30s", TokenTTL: 24 * time.Hour, SDBin: sd}
	if err := os.MkdirAll(run.Dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(prometheusAddrFile(s), []byte(*addr), 0o644); err != nil {
		return err
	}
	srv, _, err := run.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Prometheus scrapes the module's ServiceMonitors through kube-rbac-proxy as %s/%s; prometheus-sd keeps its targets current (a change of the ServiceMonitors needs `devcluster prometheus up` again; the token lasts 24h)\n",
		prometheus.Namespace, prometheus.Account)
	fmt.Println(srv.URL())
	return nil
}
