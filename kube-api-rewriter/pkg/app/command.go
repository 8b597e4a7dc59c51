package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main runs the command with the arguments after the program name and returns its exit code: 0,
// 1 when the proxy (or rename-crds) fails, 2 when the options are wrong. A bad flag on the
// command line exits the process with 2 (flag.ExitOnError), as -h exits it with 0.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "rename-crds" {
		if err := RenameCRDs(args[1:], stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "kube-api-rewriter rename-crds:", err)
			return 1
		}
		return 0
	}
	o := NewOptions()
	fs := flag.NewFlagSet("kube-api-rewriter", flag.ExitOnError)
	fs.SetOutput(stderr)
	o.AddFlags(fs)
	if err := Parse(fs, args, os.LookupEnv); err != nil {
		fmt.Fprintln(stderr, "kube-api-rewriter:", err)
		return 2
	}
	log, err := o.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "kube-api-rewriter:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := o.Complete(log)
	if err == nil {
		err = p.Run(ctx)
	}
	if err != nil {
		log.Error("exiting", "err", err)
		return 1
	}
	return 0
}
