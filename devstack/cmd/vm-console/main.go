// Command vm-console attaches the terminal to a VMI's serial console through the
// subresources.kubevirt.io API, as `virtctl console` does. Ctrl+] detaches.
//
//	vm-console --kubeconfig <kubevirt.kubeconfig> [-n namespace] <name>
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/kubevirt-core/pkg/console"
)

// detach is Ctrl+], virtctl's escape character.
const detach = 0x1d

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vm-console:", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig that speaks kubevirt.io (the one make run prints)")
	namespace := flag.String("n", "default", "namespace of the VMI")
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
	if term.IsTerminal(int(os.Stdin.Fd())) {
		old, err := term.MakeRaw(int(os.Stdin.Fd()))
		if err != nil {
			return fmt.Errorf("raw terminal: %w", err)
		}
		defer func() { _ = term.Restore(int(os.Stdin.Fd()), old) }()
	}
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(os.Stdout, conn)
		done <- err
	}()
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := os.Stdin.Read(buf)
			for i := 0; i < n; i++ {
				if buf[i] == detach {
					if i > 0 {
						_, _ = conn.Write(buf[:i])
					}
					done <- nil
					return
				}
			}
			if n > 0 {
				if _, werr := conn.Write(buf[:n]); werr != nil {
					done <- werr
					return
				}
			}
			if err != nil {
				done <- nil
				return
			}
		}
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
	}
	return err
}
