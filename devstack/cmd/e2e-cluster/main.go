// Command e2e-cluster starts and stops the cluster with the module installed that the e2e
// packages of `make test` share (devstack/moduletest: a private stack with local nodes and the
// chart installed), and builds the binaries it runs once for the whole suite.
//
//	e2e-cluster [-repo DIR] build DIR
//	        build the binaries a cluster runs into DIR (hand it to the tests as D8V_TEST_MODULE_BIN),
//	        and the previous release's into the machine-wide cache (release.Prepare: once a machine)
//	e2e-cluster [-repo DIR] up -record FILE [-nodes node-a,node-b]
//	        start a cluster (with the binaries of D8V_TEST_MODULE_BIN, else its own build),
//	        install the module, wait until it is ready and write its record to FILE (hand it to
//	        the tests as D8V_TEST_MODULE)
//	e2e-cluster down -record FILE
//	        stop the cluster of the record and remove it, its files and the record; nothing
//	        when there is no record
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/release"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-cluster:", err)
		os.Exit(1)
	}
}

const usage = "usage: e2e-cluster [-repo DIR] build DIR | up -record FILE [-nodes a,b] | down -record FILE"

func run() error {
	repo := flag.String("repo", ".", "repository root: the binaries' sources, charts/virtualization")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		return errors.New(usage)
	}
	root, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	switch args[0] {
	case "build":
		if len(args) != 2 {
			return errors.New(usage)
		}
		start := time.Now()
		if err := moduletest.Build(ctx, root, args[1]); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "e2e-cluster: built the binaries into %s in %s\n", args[1], time.Since(start).Round(time.Second))
		start = time.Now()
		prev, err := release.Prepare(ctx, root, release.Previous)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "e2e-cluster: the previous release %s is in %s (%s)\n", prev.Version, prev.Bin, time.Since(start).Round(time.Second))
		return nil
	case "up", "down":
		fs := flag.NewFlagSet(args[0], flag.ExitOnError)
		record := fs.String("record", "", "the cluster's record")
		nodes := fs.String("nodes", "node-a,node-b", "comma-separated local nodes (up)")
		_ = fs.Parse(args[1:])
		if *record == "" || fs.NArg() != 0 {
			return errors.New(usage)
		}
		n, err := localnet.Default()
		if err != nil {
			return err
		}
		if args[0] == "down" {
			return down(*record, n)
		}
		return up(ctx, moduletest.Config{Repo: root, Net: n, Nodes: strings.Split(*nodes, ","), Log: os.Stderr}, *record)
	}
	return errors.New(usage)
}

func up(ctx context.Context, cfg moduletest.Config, record string) error {
	if _, err := os.Stat(record); err == nil {
		return fmt.Errorf("%s exists: a cluster may still run (e2e-cluster down -record %s)", record, record)
	}
	start := time.Now()
	c, err := moduletest.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if err := c.WriteRecord(record); err != nil {
		return errors.Join(err, c.Stop())
	}
	if err := c.Install(ctx); err != nil {
		c.Logs(os.Stderr)
		return errors.Join(fmt.Errorf("install the module: %w", err), down(record, cfg.Net))
	}
	fmt.Fprintf(os.Stderr, "e2e-cluster: the module is ready on %v after %s; record %s\n", c.Nodes, time.Since(start).Round(time.Second), record)
	return nil
}

func down(record string, n localnet.Net) error {
	c, err := moduletest.Load(record, n, os.Stderr)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.Stop(); err != nil {
		return err
	}
	return os.Remove(record)
}
