// Command libvirtd starts (up) or stops (down) the local stack's private libvirtd and virtlogd.
// `up` prints the connection URI as its last line, for `virsh -c "$(...)"` and the tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/d8virt/devstack/libvirtd"
)

func main() {
	state := flag.String("state-dir", envOr("D8V_LIBVIRT_STATE", libvirtd.DefaultStateDir()), "instance state directory (env D8V_LIBVIRT_STATE)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] up|down\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := libvirtd.Options{StateDir: *state}
	switch flag.Arg(0) {
	case "up":
		d, err := libvirtd.Start(ctx, opts)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "libvirtd: running, logs in %s\n", d.LogDir)
		fmt.Println(d.URI)
	case "down":
		if err := libvirtd.Stop(ctx, opts); err != nil {
			fail(err)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
