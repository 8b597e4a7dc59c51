package network

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DHCP ports.
const (
	ServerPort = 67
	ClientPort = 68
)

// LeaseTime is how long the guest may keep its address. Nothing else ever wants 10.0.2.2 on this
// bridge, so the lease is as long as KubeVirt's (999 days): the guest never has to renew while
// the launcher is busy elsewhere.
const LeaseTime = 999 * 24 * time.Hour

// Lease is the one lease the server hands out, to the one client it serves.
type Lease struct {
	ClientMAC net.HardwareAddr
	// Addr is the guest's address with the subnet's length.
	Addr     netip.Prefix
	Router   netip.Addr
	ServerID netip.Addr
	DNS      []netip.Addr
	// Search is the DNS search list; its first entry also goes out as the domain name.
	Search   []string
	Hostname string
	MTU      uint16
	Duration time.Duration
}

// LeaseEvent tells whether the guest holds the lease (after an ACK) or gave it up.
type LeaseEvent struct {
	Bound bool
	Addr  netip.Addr
}

// Reply answers req as the server for l, or returns nil when the server must stay silent: a
// message from another client, a reply, a REQUEST for another server, RELEASE and DECLINE (which
// only end the lease; see Server).
func (l *Lease) Reply(req *Message) (*Message, error) {
	if req.Op != OpRequest || !bytes.Equal(req.CHAddr, l.ClientMAC) {
		return nil, nil
	}
	reply := &Message{
		Op:      OpReply,
		HType:   req.HType,
		XID:     req.XID,
		Flags:   req.Flags,
		GIAddr:  req.GIAddr,
		CHAddr:  req.CHAddr,
		Options: map[byte][]byte{},
	}
	reply.SetAddrs(OptServerID, l.ServerID)

	switch req.Type() {
	case Discover:
		reply.Options[OptMessageType] = []byte{byte(Offer)}
		reply.YIAddr = l.Addr.Addr()
		return reply, l.configure(reply, true)

	case Request:
		if id, ok := req.Addr(OptServerID); ok && id != l.ServerID {
			// The client took another server's offer.
			return nil, nil
		}
		want, ok := req.Addr(OptRequestedIP)
		if !ok {
			// RENEWING and REBINDING clients name their address in ciaddr instead.
			want = req.CIAddr
		}
		if want != l.Addr.Addr() {
			reply.Options[OptMessageType] = []byte{byte(Nak)}
			reply.Options[OptMessage] = []byte("requested address is not this client's")
			// A NAK goes to every client on the link: the client may hold a wrong address.
			reply.Flags |= Broadcast
			return reply, nil
		}
		reply.Options[OptMessageType] = []byte{byte(Ack)}
		reply.YIAddr = l.Addr.Addr()
		reply.CIAddr = req.CIAddr
		return reply, l.configure(reply, true)

	case Inform:
		// The client configured its address itself and only wants the other parameters.
		reply.Options[OptMessageType] = []byte{byte(Ack)}
		reply.CIAddr = req.CIAddr
		return reply, l.configure(reply, false)
	}
	return nil, nil
}

// configure adds the network parameters to an OFFER or ACK.
func (l *Lease) configure(m *Message, withLease bool) error {
	if withLease {
		secs := l.Duration / time.Second
		if secs > 0xfffffffe {
			// 0xffffffff means infinite, which some clients mishandle.
			secs = 0xfffffffe
		}
		m.SetUint32(OptLeaseTime, uint32(secs))
	}
	ones := l.Addr.Bits()
	mask := net.CIDRMask(ones, 32)
	m.Options[OptSubnetMask] = []byte(mask)
	if l.Router.IsValid() {
		m.SetAddrs(OptRouter, l.Router)
	}
	if len(l.DNS) > 0 {
		m.SetAddrs(OptDNS, l.DNS...)
	}
	if l.Hostname != "" {
		m.Options[OptHostname] = []byte(l.Hostname)
	}
	if len(l.Search) > 0 {
		m.Options[OptDomainName] = []byte(l.Search[0])
		list, err := EncodeDomainList(l.Search)
		if err != nil {
			return fmt.Errorf("search list: %w", err)
		}
		m.Options[OptDomainSearch] = list
	}
	if l.MTU >= 68 {
		m.SetUint16(OptInterfaceMTU, l.MTU)
	}
	return nil
}

// Server is a DHCPv4 server for one client on one interface (the guest on the bridge).
type Server struct {
	lease   Lease
	conn    *net.UDPConn
	log     *slog.Logger
	onLease func(LeaseEvent)
	done    chan struct{}
	once    sync.Once
}

// ListenDHCP opens the server's socket on port 67 of iface only: SO_BINDTODEVICE keeps the
// server off every other link of the Pod, and lets it send broadcasts out of the bridge although
// the guest has no address yet.
func ListenDHCP(ctx context.Context, iface string) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
				return
			}
			serr = unix.BindToDevice(int(fd), iface)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", ServerPort))
	if err != nil {
		return nil, fmt.Errorf("DHCP server socket on %s: %w", iface, err)
	}
	return pc.(*net.UDPConn), nil
}

// NewServer serves lease on conn until Close. onLease, if set, hears of every ACK and release.
func NewServer(conn *net.UDPConn, lease Lease, onLease func(LeaseEvent), log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{lease: lease, conn: conn, log: log, onLease: onLease, done: make(chan struct{})}
	go s.serve()
	return s
}

// Close stops the server and waits until it has.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() { err = s.conn.Close() })
	<-s.done
	return err
}

func (s *Server) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("DHCP server stopped", "err", err)
			}
			return
		}
		req, err := ParseMessage(buf[:n])
		if err != nil {
			s.log.Debug("DHCP: ignoring a malformed message", "from", from, "err", err)
			continue
		}
		s.handle(req)
	}
}

func (s *Server) handle(req *Message) {
	log := s.log.With("type", req.Type().String(), "mac", req.CHAddr.String(), "xid", fmt.Sprintf("%#08x", req.XID))
	if req.Op == OpRequest && bytes.Equal(req.CHAddr, s.lease.ClientMAC) {
		switch req.Type() {
		case Release, Decline:
			if id, ok := req.Addr(OptServerID); !ok || id == s.lease.ServerID {
				log.Info("DHCP: the guest gave up its address")
				s.notify(LeaseEvent{Bound: false, Addr: s.lease.Addr.Addr()})
			}
			return
		}
	}
	reply, err := s.lease.Reply(req)
	if err != nil {
		log.Error("DHCP: cannot build the reply", "err", err)
		return
	}
	if reply == nil {
		log.Debug("DHCP: not answering")
		return
	}
	b, err := reply.Marshal()
	if err != nil {
		log.Error("DHCP: cannot encode the reply", "err", err)
		return
	}
	// RFC 2131 4.1: a client that has its address (renewing, INFORM) gets a unicast; one without
	// can only take a broadcast, since it cannot answer ARP yet.
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), ClientPort)
	if reply.CIAddr.IsValid() && !reply.CIAddr.IsUnspecified() && reply.Flags&Broadcast == 0 {
		dst = netip.AddrPortFrom(reply.CIAddr, ClientPort)
	}
	if _, err := s.conn.WriteToUDPAddrPort(b, dst); err != nil {
		log.Error("DHCP: send reply", "to", dst, "err", err)
		return
	}
	log.Info("DHCP: answered", "reply", reply.Type().String(), "yiaddr", reply.YIAddr, "to", dst)
	if reply.Type() == Ack && reply.YIAddr.IsValid() && !reply.YIAddr.IsUnspecified() {
		s.notify(LeaseEvent{Bound: true, Addr: reply.YIAddr})
	}
}

func (s *Server) notify(ev LeaseEvent) {
	if s.onLease != nil {
		s.onLease(ev)
	}
}
