// Package svcproxy is the local stack's service proxy, as kube-proxy's old userspace mode was: a
// TCP listener on each Service's cluster IP and port that forwards every connection to one of
// the ready endpoints behind it. The cluster IPs are local addresses of this machine (one route
// `local <service CIDR> dev lo` per stack), so pods reach them through their default route to
// the bridge and processes on the host directly; no netfilter rule is involved.
package svcproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/devstack/servicetable"
)

// Frontends is what the proxy should serve: for each cluster IP and port, and for each node
// port at node (the nodes' address: the local stack's nodes share one, the bridge's), the
// endpoints behind it. Only TCP ports are served; the others are returned as skipped
// ("ns/name:port/proto").
func Frontends(t servicetable.Table, node netip.Addr) (map[netip.AddrPort][]netip.AddrPort, []string) {
	out := map[netip.AddrPort][]netip.AddrPort{}
	var skipped []string
	for _, s := range t {
		if !s.ClusterIP.IsValid() {
			continue
		}
		for _, p := range s.Ports {
			if p.Protocol != corev1.ProtocolTCP {
				skipped = append(skipped, fmt.Sprintf("%s:%d/%s", s.NamespacedName, p.Port, p.Protocol))
				continue
			}
			out[netip.AddrPortFrom(s.ClusterIP, uint16(p.Port))] = p.Backends
			if p.NodePort != 0 && node.IsValid() {
				out[netip.AddrPortFrom(node, uint16(p.NodePort))] = p.Backends
			}
		}
	}
	return out, skipped
}

// Proxy serves the frontends it was last synced to.
type Proxy struct {
	log         *slog.Logger
	listen      func(addr netip.AddrPort) (net.Listener, error)
	dial        func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	dialTimeout time.Duration

	mu    sync.Mutex
	ports map[netip.AddrPort]*frontend
	wg    sync.WaitGroup
}

type frontend struct {
	ln       net.Listener
	backends atomic.Pointer[[]netip.AddrPort]
	next     atomic.Uint32
}

// New returns a proxy that opens listeners with listen and connects to endpoints with dial,
// giving each endpoint dialTimeout before it tries the next.
func New(log *slog.Logger, listen func(netip.AddrPort) (net.Listener, error),
	dial func(context.Context, netip.AddrPort) (net.Conn, error), dialTimeout time.Duration) *Proxy {
	return &Proxy{log: log, listen: listen, dial: dial, dialTimeout: dialTimeout, ports: map[netip.AddrPort]*frontend{}}
}

// TCPListen and TCPDial are the real network.
func TCPListen(addr netip.AddrPort) (net.Listener, error) { return net.Listen("tcp", addr.String()) }

func TCPDial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr.String())
}

// Sync opens listeners for new frontends, closes those of frontends that went, and gives every
// frontend its current endpoints; connections that are open stay open. A listener that cannot
// be opened is reported and retried at the next Sync.
func (p *Proxy) Sync(want map[netip.AddrPort][]netip.AddrPort) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, f := range p.ports {
		if _, ok := want[addr]; !ok {
			f.ln.Close()
			delete(p.ports, addr)
			p.log.Info("service port removed", "frontend", addr)
		}
	}
	var errs []error
	for addr, backends := range want {
		f, ok := p.ports[addr]
		if !ok {
			ln, err := p.listen(addr)
			if err != nil {
				errs = append(errs, fmt.Errorf("listen on %s: %w", addr, err))
				continue
			}
			f = &frontend{ln: ln}
			bs := append([]netip.AddrPort(nil), backends...)
			f.backends.Store(&bs) // before the first connection can be accepted
			p.ports[addr] = f
			p.wg.Add(1)
			go p.serve(addr, f)
			p.log.Info("service port added", "frontend", addr, "endpoints", len(backends))
			continue
		}
		if old := *f.backends.Load(); !slices.Equal(old, backends) {
			p.log.Info("service endpoints changed", "frontend", addr, "endpoints", len(backends))
			bs := append([]netip.AddrPort(nil), backends...)
			f.backends.Store(&bs)
		}
	}
	return errors.Join(errs...)
}

// Close stops every listener and waits until their accept loops ended.
func (p *Proxy) Close() {
	p.mu.Lock()
	for addr, f := range p.ports {
		f.ln.Close()
		delete(p.ports, addr)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve(addr netip.AddrPort, f *frontend) {
	defer p.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed by Sync or Close
		}
		go p.forward(addr, f, c)
	}
}

// forward connects c to the endpoints in turn, round-robin, and copies both ways. Without an
// endpoint that answers, c is closed at once, as a Service without endpoints refuses.
func (p *Proxy) forward(addr netip.AddrPort, f *frontend, c net.Conn) {
	defer c.Close()
	backends := *f.backends.Load()
	start := int(f.next.Add(1))
	var up net.Conn
	for i := range backends {
		b := backends[(start+i)%len(backends)]
		ctx, cancel := context.WithTimeout(context.Background(), p.dialTimeout)
		conn, err := p.dial(ctx, b)
		cancel()
		if err == nil {
			up = conn
			break
		}
		p.log.Debug("endpoint does not answer", "frontend", addr, "endpoint", b, "err", err)
	}
	if up == nil {
		p.log.Debug("no endpoint answers", "frontend", addr, "endpoints", len(backends), "client", c.RemoteAddr())
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}
