package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
)

// vncViewer is a VNC viewer vnc starts, and how it is told the local address.
type vncViewer struct {
	program string
	args    func(a *net.TCPAddr) []string
}

// vncViewers are looked for in this order, as virtctl does: virt-viewer's remote-viewer takes a
// vnc:// URI, TigerVNC's vncviewer HOST::PORT (two colons: a port, not a display number).
var vncViewers = []vncViewer{
	{"remote-viewer", func(a *net.TCPAddr) []string { return []string{"vnc://" + a.String()} }},
	{"vncviewer", func(a *net.TCPAddr) []string { return []string{a.IP.String() + "::" + strconv.Itoa(a.Port)} }},
}

// findVNCViewer is the first viewer on PATH with its arguments for a; ok is false when there is
// none.
func findVNCViewer(a *net.TCPAddr) (path string, args []string, ok bool) {
	for _, v := range vncViewers {
		if p, err := exec.LookPath(v.program); err == nil {
			return p, v.args(a), true
		}
	}
	return "", nil, false
}

// serveVNC relays the listener's connections to the VM's VNC; with a viewer on PATH (and not
// proxyOnly) it starts the viewer at the listener and ends when the viewer does, else it serves
// until ctx ends.
func serveVNC(ctx context.Context, e *env, l net.Listener, what string, proxyOnly bool, dial func(ctx context.Context) (io.ReadWriteCloser, error)) error {
	addr := l.Addr().(*net.TCPAddr)
	path, args, found := findVNCViewer(addr)
	switch {
	case proxyOnly:
		fmt.Fprintf(e.streams.Out, "VNC of %s on %s: point a VNC viewer at it; Ctrl+C ends\n", what, addr)
	case !found:
		fmt.Fprintf(e.streams.Out, "VNC of %s on %s: no VNC viewer on PATH (remote-viewer or vncviewer), point one at it; Ctrl+C ends\n", what, addr)
	default:
		fmt.Fprintf(e.streams.Out, "VNC of %s on %s: starting %s\n", what, addr, path)
		ctx, cancel := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- serve(ctx, e, l, dial) }()
		err := runViewer(ctx, e, path, args)
		cancel()
		<-served
		return err
	}
	return serve(ctx, e, l, dial)
}

// runViewer runs the viewer on the command's streams; its exit code becomes the command's.
func runViewer(ctx context.Context, e *env, path string, args []string) error {
	c := exec.CommandContext(ctx, path, args...)
	c.Stdin, c.Stdout, c.Stderr = e.streams.In, e.streams.Out, e.streams.ErrOut
	return childResult(path, c.Run())
}
