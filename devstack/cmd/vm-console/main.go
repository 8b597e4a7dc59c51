// Command vm-console attaches the terminal to a core VMI's serial console (or VNC) through the
// core's subresources.kubevirt.io API, as `virtctl console` does. Ctrl+] detaches. A friendly
// VirtualMachine's console is `d8v console` (virtualization-api/cmd/d8v).
//
//	vm-console --kubeconfig <kubevirt.kubeconfig> [-n namespace] <name>
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/kubevirt-core/pkg/console"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vm-console:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig that speaks kubevirt.io")
	namespace := flag.String("n", "default", "namespace of the VM")
	stream := flag.String("stream", "console", "console or vnc")
	flag.Parse()
	if flag.NArg() != 1 {
		return errors.New("usage: vm-console [--kubeconfig F] [-n NS] NAME")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	conn, err := console.Open(ctx, cfg, *namespace, flag.Arg(0), *stream)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(os.Stderr, "Successfully connected to %s console. The escape sequence is ^]\n", flag.Arg(0))
	restore, err := console.RawTerminal(os.Stdin)
	if err != nil {
		return err
	}
	defer restore()
	return console.Attach(ctx, conn, os.Stdin, os.Stdout)
}
