// Command d8v is the command-line client of the friendly VirtualMachines (pkg/cli); installed as
// kubectl-virtualization it is the kubectl plugin `kubectl virtualization`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/d8virt/virtualization-api/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, cli.NewCommand(os.Args[0], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
	stop()
	os.Exit(code)
}
