// Package network gives the guest the Pod's network with KubeVirt's masquerade binding.
//
// virt-launcher runs as root in the Pod's network namespace, whose pod interface (eth0) holds the
// pod IP. Setup builds, in that namespace:
//
//   - a bridge k6t-eth0 with the gateway address 10.0.2.1/24, and a tap device on it that libvirt
//     hands to QEMU for the guest's NIC (<interface type='ethernet'>, managed='no');
//   - an nftables table (see rulesFor) that sends the pod IP's TCP and UDP to the guest,
//     10.0.2.2, and masquerades the guest's own traffic behind the pod IP;
//   - IPv4 forwarding;
//   - a DHCP server on the bridge that gives the guest 10.0.2.2/24, the gateway, the Pod's DNS
//     servers and search list, its host name and the pod interface's MTU.
//
// So the guest is reachable at the pod IP like a container, and reaches out as the Pod does. Close
// removes all of it: the namespace dies with the Pod, but a test or a restarted launcher reuses it.
// IPv6 is not set up (the pod network of this project is IPv4).
package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Names and addresses of the binding, as in KubeVirt.
const (
	DefaultPodInterface = "eth0"
	BridgeName          = "k6t-eth0"
	TapName             = "tap0"
	DefaultResolvConf   = "/etc/resolv.conf"
)

var (
	// GatewayPrefix is the bridge's address: the guest's default gateway, on the guest's subnet.
	GatewayPrefix = netip.MustParsePrefix("10.0.2.1/24")
	// GuestPrefix is the address the guest gets by DHCP.
	GuestPrefix = netip.MustParsePrefix("10.0.2.2/24")
)

// Config is what Setup needs besides the namespace it runs in.
type Config struct {
	NIC NIC
	// PodInterface holds the pod IP. Default DefaultPodInterface.
	PodInterface string
	// ResolvConf is the Pod's resolver configuration, passed on to the guest. Default
	// DefaultResolvConf.
	ResolvConf string
	// TapOwner and TapGroup may attach to the tap device besides CAP_NET_ADMIN holders; QEMU
	// runs as root here, so the zero values fit. KubeVirt uses QEMU's user, 107.
	TapOwner, TapGroup uint32
	// HostPorts are ports the Pod itself serves on the pod IP (the live migration ports); they
	// are never forwarded to the guest, even when the interface forwards every port.
	HostPorts []Port
	// OnLease is called whenever the guest's DHCP lease changes (GuestIPs then tells the new
	// state). It must not block.
	OnLease func()
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Pod is the binding set up in the namespace.
type Pod struct {
	cfg   Config
	log   *slog.Logger
	podIP netip.Addr
	mtu   int
	rules ruleSet

	// Undo steps, run in reverse order by Close.
	undo   []func() error
	closed bool

	mu      sync.Mutex
	guestIP netip.Addr // set while the guest holds its lease
}

// Setup builds the binding in the current network namespace. Leftovers of an earlier launcher in
// the same namespace are replaced. On error, whatever Setup made is removed again.
func Setup(ctx context.Context, cfg Config) (p *Pod, err error) {
	if cfg.PodInterface == "" {
		cfg.PodInterface = DefaultPodInterface
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = DefaultResolvConf
	}
	if len(cfg.NIC.MAC) != 6 {
		return nil, fmt.Errorf("pod network: guest MAC %q is not a 48-bit MAC", cfg.NIC.MAC)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	p = &Pod{cfg: cfg, log: log.With("podInterface", cfg.PodInterface)}
	defer func() {
		if err != nil {
			if cerr := p.Close(); cerr != nil {
				log.Warn("pod network: undo a failed setup", "err", cerr)
			}
			p = nil
		}
	}()

	podLink, err := netlink.LinkByName(cfg.PodInterface)
	if err != nil {
		return nil, fmt.Errorf("pod network: pod interface %s: %w", cfg.PodInterface, err)
	}
	if p.podIP, err = podIPv4(podLink); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	p.mtu = podLink.Attrs().MTU
	dns, err := ReadResolvConf(cfg.ResolvConf)
	if err != nil {
		// The guest still gets an address and a route; names then fail inside it, visibly.
		p.log.Warn("pod network: no DNS configuration for the guest", "err", err)
	}

	if err := p.plumb(); err != nil {
		return nil, err
	}
	if err := p.forwarding(); err != nil {
		return nil, err
	}
	p.rules = rulesFor(cfg.PodInterface, BridgeName, p.podIP, GatewayPrefix.Addr(), GuestPrefix.Addr(), cfg.NIC.Ports, cfg.HostPorts)
	if err := applyRules(p.rules); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	p.undo = append(p.undo, removeRules)

	conn, err := ListenDHCP(ctx, BridgeName)
	if err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	lease := Lease{
		ClientMAC: cfg.NIC.MAC,
		Addr:      GuestPrefix,
		Router:    GatewayPrefix.Addr(),
		ServerID:  GatewayPrefix.Addr(),
		DNS:       dns.Servers,
		Search:    searchDomains(&cfg.NIC, dns.Search),
		Hostname:  cfg.NIC.Hostname,
		MTU:       uint16(min(p.mtu, 0xffff)),
		Duration:  LeaseTime,
	}
	srv := NewServer(conn, lease, p.leaseChanged, p.log)
	p.undo = append(p.undo, srv.Close)

	p.log.Info("pod network: masquerade binding ready", "podIP", p.podIP, "guest", GuestPrefix, "guestMAC", cfg.NIC.MAC.String(),
		"tap", TapName, "bridge", BridgeName, "mtu", p.mtu, "dns", dns.Servers, "ports", fmt.Sprint(cfg.NIC.Ports))
	p.log.Debug("pod network: nftables rules", "table", TableName, "rules", p.rules.String())
	return p, nil
}

// podIPv4 is the first global IPv4 address of the pod interface.
func podIPv4(l netlink.Link) (netip.Addr, error) {
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("addresses of %s: %w", l.Attrs().Name, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if ok && ip.IsGlobalUnicast() {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod interface %s has no IPv4 address", l.Attrs().Name)
}

// plumb creates the bridge with the gateway address and the tap on it.
func (p *Pod) plumb() error {
	for _, name := range []string{TapName, BridgeName} {
		if err := deleteLink(name); err != nil {
			return fmt.Errorf("pod network: remove leftover %s: %w", name, err)
		}
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName, MTU: p.mtu}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("pod network: create bridge %s: %w", BridgeName, err)
	}
	p.undo = append(p.undo, func() error { return deleteLink(BridgeName) })
	gw := &netlink.Addr{IPNet: prefixNet(GatewayPrefix)}
	if err := netlink.AddrAdd(br, gw); err != nil {
		return fmt.Errorf("pod network: address %s on %s: %w", GatewayPrefix, BridgeName, err)
	}
	// Connections the Pod opens to 127.0.0.1 reach the guest SNATed to the gateway; the kernel
	// routes a loopback source out of (and its replies in from) a real link only with this.
	if err := writeSysctl("net/ipv4/conf/"+BridgeName+"/route_localnet", "1"); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}

	// Persistent (so it outlives this call), without the packet-information header and with
	// virtio-net headers, as libvirt opens it for QEMU.
	tap := &netlink.Tuntap{
		LinkAttrs: netlink.LinkAttrs{Name: TapName},
		Mode:      netlink.TUNTAP_MODE_TAP,
		Flags:     netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR,
		Owner:     p.cfg.TapOwner,
		Group:     p.cfg.TapGroup,
	}
	if err := netlink.LinkAdd(tap); err != nil {
		return fmt.Errorf("pod network: create tap %s: %w", TapName, err)
	}
	p.undo = append(p.undo, func() error { return deleteLink(TapName) })
	if err := netlink.LinkSetMTU(tap, p.mtu); err != nil {
		return fmt.Errorf("pod network: MTU of %s: %w", TapName, err)
	}
	if err := netlink.LinkSetMaster(tap, br); err != nil {
		return fmt.Errorf("pod network: put %s on %s: %w", TapName, BridgeName, err)
	}
	for _, l := range []netlink.Link{tap, br} {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("pod network: bring up %s: %w", l.Attrs().Name, err)
		}
	}
	return nil
}

// forwarding turns on IPv4 forwarding in the namespace, and restores the old value on Close.
func (p *Pod) forwarding() error {
	const key = "net/ipv4/ip_forward"
	old, err := readSysctl(key)
	if err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	if old == "1" {
		return nil
	}
	if err := writeSysctl(key, "1"); err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	p.undo = append(p.undo, func() error { return writeSysctl(key, old) })
	return nil
}

func (p *Pod) leaseChanged(ev LeaseEvent) {
	p.mu.Lock()
	if ev.Bound {
		p.guestIP = ev.Addr
	} else {
		p.guestIP = netip.Addr{}
	}
	p.mu.Unlock()
	if p.cfg.OnLease != nil {
		p.cfg.OnLease()
	}
}

// PodIP is the address the guest is reachable at.
func (p *Pod) PodIP() netip.Addr { return p.podIP }

// Tap is the tap device the guest's NIC uses.
func (p *Pod) Tap() string { return TapName }

// Rules is the installed rule set in nft's syntax, one rule a line.
func (p *Pod) Rules() string { return p.rules.String() }

// GuestIPs is the address the guest holds by DHCP: 10.0.2.2 once it got its lease, none before
// or after it released it.
func (p *Pod) GuestIPs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.guestIP.IsValid() {
		return nil
	}
	return []string{p.guestIP.String()}
}

// Close stops the DHCP server and removes the rules, the tap and the bridge, and restores IP
// forwarding. It goes on past errors, so that one failed step leaves no more behind than needed,
// and returns them all.
func (p *Pod) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for i := len(p.undo) - 1; i >= 0; i-- {
		if err := p.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	p.undo = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod network teardown: %w", err)
	}
	p.log.Info("pod network: removed")
	return nil
}

// deleteLink removes a link if it exists.
func deleteLink(name string) error {
	l, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Sysctls under /proc/sys/net belong to the network namespace of the thread that opens them,
// which is the Pod's: the launcher lives there.
func readSysctl(key string) (string, error) {
	b, err := os.ReadFile("/proc/sys/" + key)
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func writeSysctl(key, value string) error {
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
