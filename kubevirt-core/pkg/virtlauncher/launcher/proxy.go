package launcher

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
)

// tcpProxy relays TCP connections to a unix socket: it opens a migration target's libvirtd,
// which listens on a unix socket only, to the source's libvirtd on the pod network.
type tcpProxy struct {
	l      net.Listener
	target string
	log    *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// listenProxy listens on addr and relays every connection to the unix socket target.
func listenProxy(addr, target string, log *slog.Logger) (*tcpProxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := &tcpProxy{l: l, target: target, log: log, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is where the proxy listens.
func (p *tcpProxy) Addr() net.Addr { return p.l.Addr() }

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				p.log.Warn("proxy: accept", "err", err)
			}
			return
		}
		p.wg.Add(1)
		go p.relay(c)
	}
}

// relay copies both ways until either side closes, then closes both.
func (p *tcpProxy) relay(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	u, err := net.Dial("unix", p.target)
	if err != nil {
		p.log.Warn("proxy: dial", "target", p.target, "err", err)
		return
	}
	defer u.Close()
	if !p.track(c, u) {
		return
	}
	defer p.untrack(c, u)
	p.log.Info("proxy: connection", "from", c.RemoteAddr().String(), "to", p.target)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
}

func (p *tcpProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// CloseListener stops accepting; relayed connections go on until their ends close them.
func (p *tcpProxy) CloseListener() {
	if err := p.l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		p.log.Debug("proxy: close listener", "err", err)
	}
}

// Close stops accepting, cuts every relayed connection and waits for the relays to end.
func (p *tcpProxy) Close() {
	p.CloseListener()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
