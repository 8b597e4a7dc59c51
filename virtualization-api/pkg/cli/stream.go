package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/kubevirt-core/pkg/console"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// subresources is the path of virtualization-api's VirtualMachines in a namespace.
const subresources = "/apis/subresources.virtualization.deckhouse.io/v1alpha2/namespaces/"

// dialer opens one stream (sub: console, vnc, portforward/PORT/tcp) of a VirtualMachine.
type dialer func(ctx context.Context, sub string) (io.ReadWriteCloser, error)

// vmDialer is the namespace and the dialer of the namespace's VirtualMachine vm through
// virtualization-api with the kubeconfig's credentials.
func vmDialer(e *env, vm string) (string, dialer, error) {
	ns, err := e.clients.Namespace()
	if err != nil {
		return "", nil, err
	}
	cfg, err := e.clients.RESTConfig()
	if err != nil {
		return "", nil, err
	}
	return ns, func(ctx context.Context, sub string) (io.ReadWriteCloser, error) {
		target, err := console.StreamURL(cfg, subresources+ns+"/virtualmachines/"+vm+"/"+sub)
		if err != nil {
			return nil, err
		}
		conn, err := console.Dial(ctx, cfg, target, fmt.Sprintf("%s of VirtualMachine %s/%s", sub, ns, vm))
		var refused *console.RefusedError
		if errors.As(err, &refused) {
			return nil, refusal(refused, ns, vm, sub)
		}
		return conn, err
	}, nil
}

// refusal is virtualization-api's refusal of a stream in words: the Status's message and what to
// do about it.
func refusal(r *console.RefusedError, ns, vm, sub string) error {
	msg := r.Message
	var st metav1.Status
	if json.Unmarshal([]byte(r.Message), &st) == nil && st.Message != "" {
		msg = st.Message
	}
	resource := "virtualmachines/" + strings.SplitN(sub, "/", 2)[0]
	hint := ""
	switch r.Code {
	case 401:
		hint = "log in again or check the kubeconfig's credentials"
	case 403:
		hint = fmt.Sprintf("ask for the verb get on %s of subresources.virtualization.deckhouse.io in %s (the edit role has it)", resource, ns)
	case 404:
		hint = fmt.Sprintf("kubectl get vm -n %s lists the VirtualMachines", ns)
	case 409:
		hint = fmt.Sprintf("kubectl get vm %s -n %s shows its phase; a console in use is shown by kubectl get --raw %s%s/virtualmachines/%s/%s", vm, ns, subresources, ns, vm, strings.SplitN(sub, "/", 2)[0])
	case 503:
		hint = "virtualization-api or the core's virt-api does not answer: kubectl get apiservice v1alpha2.subresources.virtualization.deckhouse.io"
	}
	if hint == "" {
		return fmt.Errorf("%s of VirtualMachine %s/%s: %d %s", sub, ns, vm, r.Code, msg)
	}
	return fmt.Errorf("%s of VirtualMachine %s/%s: %d %s; %s", sub, ns, vm, r.Code, msg, hint)
}

func newConsoleCommand(e *env) *cobra.Command {
	var reconnect bool
	cmd := &cobra.Command{
		Use:   "console VM",
		Short: "Attach the terminal to a VirtualMachine's serial console (Ctrl+] leaves)",
		Long: `Attach the terminal to a VirtualMachine's serial console through virtualization-api. The
terminal is raw: every key reaches the guest, Ctrl+] leaves. One console session per
VirtualMachine: while another is open the command fails naming its holder. With --reconnect a
console that closes (the guest restarted, was stopped or moved) is opened again as soon as the
VirtualMachine runs, until Ctrl+].`,
		Example:           fmt.Sprintf("  %[1]s console myvm\n  %[1]s console myvm -n prod --context staging\n  %[1]s console myvm --reconnect   # stays through restarts", e.name),
		Args:              args("VM"),
		ValidArgsFunction: completeVMs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, dial, err := vmDialer(e, args[0])
			if err != nil {
				return err
			}
			conn, err := dial(cmd.Context(), "console")
			if err != nil {
				return err
			}
			vm := ns + "/" + args[0]
			fmt.Fprintf(e.streams.ErrOut, "Successfully connected to the console of VirtualMachine %s. Press Ctrl+] to leave.\n", vm)
			if f, ok := e.streams.In.(*os.File); ok {
				restore, err := console.RawTerminal(f)
				if err != nil {
					_ = conn.Close()
					return err
				}
				defer restore()
			}
			return attachConsole(cmd.Context(), e, vm, conn, dial, reconnect)
		},
	}
	cmd.Flags().BoolVar(&reconnect, "reconnect", false, "open the console again whenever it closes, until Ctrl+]")
	return cmd
}

// attachConsole attaches the terminal to conn, the console of vm (namespace/name). Without
// reconnect it ends with the stream; with it, a stream that ends is dialled again every
// pollInterval (each different refusal of a VM that does not run reported once) until the user
// leaves. The keys typed meanwhile go to the next stream. The terminal may be raw: lines end in
// \r\n.
func attachConsole(ctx context.Context, e *env, vm string, conn io.ReadWriteCloser, dial dialer, reconnect bool) error {
	in := console.NewInput(e.streams.In)
	for {
		left, err := in.Attach(ctx, conn, e.streams.Out)
		_ = conn.Close()
		if left || !reconnect {
			return err
		}
		why := "closed"
		if err != nil {
			why = "closed: " + err.Error()
		}
		fmt.Fprintf(e.streams.ErrOut, "\r\nThe console of VirtualMachine %s %s; reconnecting (Ctrl+] leaves).\r\n", vm, why)
		if conn = redial(ctx, e, in, dial); conn == nil {
			return nil
		}
		fmt.Fprintf(e.streams.ErrOut, "Reconnected to the console of VirtualMachine %s.\r\n", vm)
	}
}

// redial dials the console every pollInterval until it opens, or nil once the user leaves or ctx
// ends; each different refusal is reported once.
func redial(ctx context.Context, e *env, in *console.Input, dial dialer) io.ReadWriteCloser {
	last := ""
	tick := time.NewTicker(e.pollInterval)
	defer tick.Stop()
	for {
		conn, err := dial(ctx, "console")
		if err == nil {
			return conn
		}
		if msg := err.Error(); msg != last {
			fmt.Fprintf(e.streams.ErrOut, "%s\r\n", msg)
			last = msg
		}
		select {
		case <-in.Left():
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func newVNCCommand(e *env) *cobra.Command {
	var address string
	var port int
	var proxyOnly bool
	cmd := &cobra.Command{
		Use:   "vnc VM",
		Short: "Open a VirtualMachine's VNC in a viewer, or serve it on a local port",
		Long: `Listen on a local port and relay each connection to the VirtualMachine's VNC through
virtualization-api. With a VNC viewer on PATH (remote-viewer, else TigerVNC's vncviewer) the
command starts it at that port and ends when the viewer does; with --proxy-only, or without a
viewer, it prints the address for one and serves until Ctrl+C. One VNC session per
VirtualMachine: a second viewer is refused while the first is connected.`,
		Example:           fmt.Sprintf("  %[1]s vnc myvm\n  %[1]s vnc myvm --proxy-only --port 5901   # then: vncviewer 127.0.0.1::5901", e.name),
		Args:              args("VM"),
		ValidArgsFunction: completeVMs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if port < 0 || port > 65535 {
				return usagef("--port %d is not a port from 0 (any free one) to 65535", port)
			}
			ns, dial, err := vmDialer(e, args[0])
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			return serveVNC(cmd.Context(), e, l, fmt.Sprintf("VirtualMachine %s/%s", ns, args[0]), proxyOnly,
				func(ctx context.Context) (io.ReadWriteCloser, error) { return dial(ctx, "vnc") })
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local address to listen on")
	cmd.Flags().IntVar(&port, "port", 0, "local port to listen on (0: a free one)")
	cmd.Flags().BoolVar(&proxyOnly, "proxy-only", false, "only serve the port, start no viewer")
	return cmd
}

// forward is one port-forward: a local port (0: a free one) to a port of the guest.
type forward struct{ local, remote int }

// parseForward reads [LOCAL:]REMOTE, as kubectl port-forward takes it (":REMOTE" picks a free
// local port).
func parseForward(s string) (forward, error) {
	local, remote, found := strings.Cut(s, ":")
	if !found {
		remote = local
	}
	r, err := strconv.Atoi(remote)
	if err != nil || r < 1 || r > 65535 {
		return forward{}, usagef("port-forward %q: the remote port %q is not a number from 1 to 65535", s, remote)
	}
	l := 0
	if local != "" {
		if l, err = strconv.Atoi(local); err != nil || l < 0 || l > 65535 {
			return forward{}, usagef("port-forward %q: the local port %q is not a number from 0 to 65535", s, local)
		}
	}
	return forward{local: l, remote: r}, nil
}

func newPortForwardCommand(e *env) *cobra.Command {
	var address string
	var stdio bool
	cmd := &cobra.Command{
		Use:   "port-forward VM [LOCAL:]REMOTE...",
		Short: "Forward local TCP ports to a VirtualMachine's guest",
		Long: `Forward local TCP ports to ports of the VirtualMachine's guest through virtualization-api, until
Ctrl+C: LOCAL:REMOTE, REMOTE (the same port locally) or :REMOTE (a free local port). With
--stdio the one port is relayed on stdin and stdout instead (an ssh ProxyCommand).`,
		Example: fmt.Sprintf("  %[1]s port-forward myvm 8080:80\n  %[1]s port-forward myvm :22 5432\n  ssh -o ProxyCommand='%[1]s port-forward --stdio myvm 22' cloud@myvm", e.name),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("%s needs VM and at least one port, got %d argument(s): see %s --help", cmd.CommandPath(), len(args), cmd.CommandPath())
			}
			if stdio && len(args) != 2 {
				return usagef("--stdio relays one port, got %d", len(args)-1)
			}
			return nil
		},
		ValidArgsFunction: completeVMs(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			var forwards []forward
			for _, a := range args[1:] {
				f, err := parseForward(a)
				if err != nil {
					return err
				}
				forwards = append(forwards, f)
			}
			ns, dial, err := vmDialer(e, args[0])
			if err != nil {
				return err
			}
			return portForward(cmd.Context(), e, ns, args[0], dial, address, stdio, forwards)
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local address to listen on")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "relay the one port on stdin and stdout")
	return cmd
}

func portForward(ctx context.Context, e *env, ns, vm string, dial dialer, address string, stdio bool, forwards []forward) error {
	remote := func(f forward) func(context.Context) (io.ReadWriteCloser, error) {
		return func(ctx context.Context) (io.ReadWriteCloser, error) {
			return dial(ctx, wsrelay.PortForward{Port: f.remote, Protocol: "tcp"}.Path())
		}
	}
	if stdio {
		conn, err := remote(forwards[0])(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		return relay(conn, readWriter{e.streams.In, e.streams.Out})
	}
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for _, f := range forwards {
		l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(f.local)))
		if err != nil {
			return fmt.Errorf("listen for port %d: %w", f.remote, err)
		}
		listeners = append(listeners, l)
		fmt.Fprintf(e.streams.Out, "Forwarding from %s to port %d of VirtualMachine %s/%s\n", l.Addr(), f.remote, ns, vm)
	}
	errs := make(chan error, len(forwards))
	for i, l := range listeners {
		go func() { errs <- serve(ctx, e, l, remote(forwards[i])) }()
	}
	return <-errs
}

// serve relays each connection l accepts to a stream of open until ctx ends.
func serve(ctx context.Context, e *env, l net.Listener, open func(context.Context) (io.ReadWriteCloser, error)) error {
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		local, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go func() {
			defer local.Close()
			conn, err := open(ctx)
			if err != nil {
				fmt.Fprintf(e.streams.ErrOut, "connection from %s: %v\n", local.RemoteAddr(), err)
				return
			}
			defer conn.Close()
			if err := relay(conn, local); err != nil {
				fmt.Fprintf(e.streams.ErrOut, "connection from %s: %v\n", local.RemoteAddr(), err)
			}
		}()
	}
}

// readWriter joins a reader and a writer (stdin and stdout).
type readWriter struct {
	io.Reader
	io.Writer
}

// relay copies both ways between the stream and a local side until either ends.
func relay(stream io.ReadWriter, local io.ReadWriter) error {
	var once sync.Once
	done := make(chan error, 2)
	end := func(err error) { once.Do(func() { done <- err }) }
	go func() {
		_, err := io.Copy(stream, local)
		end(err)
	}()
	go func() {
		_, err := io.Copy(local, stream)
		end(err)
	}()
	err := <-done
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
