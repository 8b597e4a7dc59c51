// Command vm-console attaches the terminal to a VirtualMachine's serial console through
// virtualization-api (subresources.virtualization.deckhouse.io, as users reach it), or with -core
// to a VMI's through the core's subresources.kubevirt.io API, as `virtctl console` does. Ctrl+]
// detaches.
//
//	vm-console --kubeconfig <admin.kubeconfig> [-n namespace] <name>
//	vm-console -core --kubeconfig <kubevirt.kubeconfig> [-n namespace] <name>
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
	"k8s.io/client-go/rest"
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
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the user (with -core: one that speaks kubevirt.io)")
	namespace := flag.String("n", "default", "namespace of the VM")
	stream := flag.String("stream", "console", "console or vnc")
	core := flag.Bool("core", false, "a VMI of the core, through subresources.kubevirt.io, instead of a friendly VirtualMachine through virtualization-api")
	flag.Parse()
	if flag.NArg() != 1 {
		return errors.New("usage: vm-console [-core] [--kubeconfig F] [-n NS] NAME")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var conn *console.Conn
	if *core {
		conn, err = console.Open(ctx, cfg, *namespace, flag.Arg(0), *stream)
	} else {
		conn, err = openFriendly(ctx, cfg, *namespace, flag.Arg(0), *stream)
	}
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

// openFriendly opens a friendly VirtualMachine's stream through virtualization-api.
func openFriendly(ctx context.Context, cfg *rest.Config, namespace, name, stream string) (*console.Conn, error) {
	target, err := console.StreamURL(cfg, "/apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/"+namespace+"/virtualmachines/"+name+"/"+stream)
	if err != nil {
		return nil, err
	}
	return console.Dial(ctx, cfg, target, fmt.Sprintf("%s of VirtualMachine %s/%s", stream, namespace, name))
}
