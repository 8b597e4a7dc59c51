// Package localnet gives the local stack a network that behaves like a cluster's: a bridge on this
// machine and "test hosts", network namespaces with a veth pair and their own address on one
// subnet. Endpoints, EndpointSlices and the apiserver's advertise address reject loopback, so the
// apiserver advertises the bridge address and servers behind Services live in test hosts.
//
// Nothing here ever addresses anything but the bridge and the namespaces it created.
package localnet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/d8virt/devstack/filelock"
)

// Defaults of the one network every local stack on this machine shares.
const (
	DefaultBridge   = "d8v0"
	DefaultSubnet   = "10.213.0.0/24"
	DefaultStateDir = "/run/d8v-localnet"
	// NetNSPrefix marks the namespaces this package owns, so that a teardown finds them all.
	NetNSPrefix = "d8v-"
)

// Net is the bridge, its subnet and the directory that records which address each host holds.
type Net struct {
	Bridge   string
	Subnet   netip.Prefix
	StateDir string
	// Requested is the part of Subnet handed out only on request (AddHostAt), never by
	// AddHost: the addresses a CNI gives pods that ask for one, such as the virtual machines'
	// virtualMachineCIDRs. The last quarter of Subnet unless D8V_REQUESTED_SUBNET says otherwise
	// (10.213.0.192/26 by default).
	Requested netip.Prefix
}

// ErrAddrTaken is the error of a requested address another host holds.
var ErrAddrTaken = errors.New("the address is taken")

// Default returns the network described by the D8V_BRIDGE, D8V_SUBNET and D8V_NET_STATE
// environment variables, or by the defaults.
func Default() (Net, error) {
	n := Net{Bridge: envOr("D8V_BRIDGE", DefaultBridge), StateDir: envOr("D8V_NET_STATE", DefaultStateDir)}
	p, err := netip.ParsePrefix(envOr("D8V_SUBNET", DefaultSubnet))
	if err != nil {
		return Net{}, fmt.Errorf("parse D8V_SUBNET: %w", err)
	}
	if !p.Addr().Is4() || p.Bits() > 30 {
		return Net{}, fmt.Errorf("subnet %s: want an IPv4 prefix of /30 or larger", p)
	}
	n.Subnet = p.Masked()
	n.Requested = netip.PrefixFrom(lastAddr(n.Subnet), min(n.Subnet.Bits()+2, 32)).Masked()
	if v := os.Getenv("D8V_REQUESTED_SUBNET"); v != "" {
		r, err := netip.ParsePrefix(v)
		if err != nil {
			return Net{}, fmt.Errorf("parse D8V_REQUESTED_SUBNET: %w", err)
		}
		if !n.Subnet.Contains(r.Addr()) || r.Bits() < n.Subnet.Bits() {
			return Net{}, fmt.Errorf("D8V_REQUESTED_SUBNET %s is not inside %s", r, n.Subnet)
		}
		n.Requested = r.Masked()
	}
	return n, nil
}

// lastAddr is the last (broadcast) address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	bits := p.Bits()
	for i := range 4 {
		for b := range 8 {
			if i*8+b >= bits {
				a[i] |= 0x80 >> b
			}
		}
	}
	return netip.AddrFrom4(a)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// GatewayIP is the bridge's own address: the first address of the subnet.
func (n Net) GatewayIP() netip.Addr { return n.Subnet.Addr().Next() }

// Ensure creates the bridge with its address if it is missing, and brings it up.
func (n Net) Ensure() error {
	if err := os.MkdirAll(n.hostsDir(), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", n.hostsDir(), err)
	}
	if _, err := net.InterfaceByName(n.Bridge); err != nil {
		if err := ip("link", "add", n.Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	addr := fmt.Sprintf("%s/%d", n.GatewayIP(), n.Subnet.Bits())
	if err := ip("addr", "replace", addr, "dev", n.Bridge); err != nil {
		return err
	}
	return ip("link", "set", n.Bridge, "up")
}

// Host is one network namespace on the bridge.
type Host struct {
	Name  string
	NetNS string
	IP    netip.Addr
}

// AddHost creates the namespace for name with a free address (outside Requested), or returns
// the one that exists.
func (n Net) AddHost(name string) (Host, error) { return n.AddHostAt(name, netip.Addr{}) }

// AddHostAt is AddHost with the address want, when valid: it must be a host address of Subnet
// that no other host holds (ErrAddrTaken), as a CNI's requested address. A host of that name
// that exists keeps its address.
func (n Net) AddHostAt(name string, want netip.Addr) (Host, error) {
	if err := n.Ensure(); err != nil {
		return Host{}, err
	}
	unlock, err := n.lock()
	if err != nil {
		return Host{}, err
	}
	defer unlock()

	if h, err := n.host(name); err == nil && nsExists(h.NetNS) {
		return h, nil
	}
	addr, err := n.freeAddr()
	if want.IsValid() {
		addr, err = n.requestedAddr(name, want)
	}
	if err != nil {
		return Host{}, err
	}
	h := Host{Name: name, NetNS: NetNSPrefix + name, IP: addr}
	if err := os.WriteFile(filepath.Join(n.hostsDir(), name), []byte(addr.String()), 0o644); err != nil {
		return Host{}, fmt.Errorf("record address of host %s: %w", name, err)
	}
	if err := n.plumb(h); err != nil {
		_ = n.deleteLocked(name)
		return Host{}, fmt.Errorf("create host %s: %w", name, err)
	}
	return h, nil
}

func (n Net) plumb(h Host) error {
	outer, inner := vethNames(h.Name)
	gw := n.GatewayIP().String()
	steps := [][]string{
		// The address may have belonged to a host that is gone: this machine's neighbour entry
		// would still name that host's MAC, and for seconds packets to the new host would go
		// nowhere.
		{"neigh", "flush", "to", h.IP.String(), "dev", n.Bridge},
		{"netns", "add", h.NetNS},
		{"link", "add", outer, "type", "veth", "peer", "name", inner, "netns", h.NetNS},
		{"link", "set", outer, "master", n.Bridge, "up"},
		{"-n", h.NetNS, "link", "set", inner, "name", "eth0"},
		{"-n", h.NetNS, "addr", "add", fmt.Sprintf("%s/%d", h.IP, n.Subnet.Bits()), "dev", "eth0"},
		{"-n", h.NetNS, "link", "set", "eth0", "up"},
		{"-n", h.NetNS, "link", "set", "lo", "up"},
		{"-n", h.NetNS, "route", "add", "default", "via", gw},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	// The flush above fixes this machine's entry; the peers in other namespaces learn the new
	// MAC from the announcement.
	return n.announce(h)
}

// DeleteHost removes the namespace of name, its veth and its address. A missing host is no error.
func (n Net) DeleteHost(name string) error {
	unlock, err := n.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return n.deleteLocked(name)
}

func (n Net) deleteLocked(name string) error {
	ns := NetNSPrefix + name
	if nsExists(ns) {
		// Deleting the namespace destroys the inner veth end, and with it the outer one.
		if err := ip("netns", "del", ns); err != nil {
			return err
		}
	}
	outer, _ := vethNames(name)
	if _, err := net.InterfaceByName(outer); err == nil {
		_ = ip("link", "del", outer)
	}
	if err := os.Remove(filepath.Join(n.hostsDir(), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release address of host %s: %w", name, err)
	}
	return nil
}

// Hosts lists the hosts that hold an address.
func (n Net) Hosts() ([]Host, error) {
	entries, err := os.ReadDir(n.hostsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	var hosts []Host
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		h, err := n.host(e.Name())
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].IP.Less(hosts[j].IP) })
	return hosts, nil
}

func (n Net) host(name string) (Host, error) {
	b, err := os.ReadFile(filepath.Join(n.hostsDir(), name))
	if err != nil {
		return Host{}, fmt.Errorf("host %s: %w", name, err)
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		return Host{}, fmt.Errorf("host %s: bad address record: %w", name, err)
	}
	return Host{Name: name, NetNS: NetNSPrefix + name, IP: addr}, nil
}

// taken is every address a host holds: recorded, or configured in a namespace of ours.
func (n Net) taken() (map[netip.Addr]string, error) {
	hosts, err := n.Hosts()
	if err != nil {
		return nil, err
	}
	inUse, err := addrsInUse()
	if err != nil {
		return nil, err
	}
	taken := map[netip.Addr]string{}
	for a := range inUse {
		taken[a] = "a network namespace"
	}
	for _, h := range hosts {
		taken[h.IP] = "host " + h.Name
	}
	return taken, nil
}

// requestedAddr checks that want may go to the host name.
func (n Net) requestedAddr(name string, want netip.Addr) (netip.Addr, error) {
	if !want.Is4() || !n.Subnet.Contains(want) || want == n.GatewayIP() || want == n.Subnet.Addr() || want == lastAddr(n.Subnet) {
		return netip.Addr{}, fmt.Errorf("requested address %s: not a host address of the subnet %s", want, n.Subnet)
	}
	taken, err := n.taken()
	if err != nil {
		return netip.Addr{}, err
	}
	if holder, ok := taken[want]; ok && holder != "host "+name {
		return netip.Addr{}, fmt.Errorf("requested address %s: %w by %s", want, ErrAddrTaken, holder)
	}
	return want, nil
}

func (n Net) freeAddr() (netip.Addr, error) {
	held, err := n.taken()
	if err != nil {
		return netip.Addr{}, err
	}
	taken := make(map[netip.Addr]bool, len(held))
	for a := range held {
		taken[a] = true
	}
	if n.Requested.IsValid() {
		for a := n.Requested.Addr(); n.Requested.Contains(a); a = a.Next() {
			taken[a] = true
		}
	}
	addr, err := nextAddr(n.Subnet, n.lastAddr(), taken)
	if err != nil {
		return netip.Addr{}, err
	}
	if err := os.WriteFile(n.lastAddrFile(), []byte(addr.String()), 0o644); err != nil {
		return netip.Addr{}, fmt.Errorf("record last address: %w", err)
	}
	return addr, nil
}

// nextAddr is the first address of subnet after last, going round, that is not taken and is
// neither the gateway nor the broadcast address. Handing addresses out round-robin keeps a freed
// address out of use for as long as the subnet allows, so the neighbour entries that name its old
// holder have long gone stale when it comes back. A last outside the subnet starts at its start.
func nextAddr(subnet netip.Prefix, last netip.Addr, taken map[netip.Addr]bool) (netip.Addr, error) {
	first := subnet.Addr().Next().Next() // after the gateway
	if !subnet.Contains(last) {
		last = first.Prev()
	}
	usable := func(a netip.Addr) bool {
		return subnet.Contains(a) && subnet.Contains(a.Next()) && a.Compare(first) >= 0
	}
	a := last
	for range 1 << (32 - subnet.Bits()) {
		if a = a.Next(); !usable(a) {
			a = first
		}
		if !taken[a] {
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("subnet %s has no free address", subnet)
}

// lastAddr is the address handed out last, or the zero address when none is recorded.
func (n Net) lastAddr() netip.Addr {
	b, err := os.ReadFile(n.lastAddrFile())
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		return netip.Addr{}
	}
	return a
}

func (n Net) lastAddrFile() string { return filepath.Join(n.StateDir, "last-addr") }

func (n Net) hostsDir() string { return filepath.Join(n.StateDir, "hosts") }

// lock serialises address allocation between processes, such as parallel test binaries.
func (n Net) lock() (func(), error) { return filelock.Lock(filepath.Join(n.StateDir, ".lock")) }

// vethNames derives interface names from the host name; Linux allows 15 bytes.
func vethNames(name string) (outer, inner string) {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:10]
	return "d8v" + h, "d8p" + h
}

func nsExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Listen opens a listener inside the host's namespace. The socket stays in that namespace for its
// whole life, so the calling process can serve from it like from any other listener.
func (h Host) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := h.Do(func() error {
		var err error
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

// Do runs fn on an OS thread that has entered the host's namespace. The thread is discarded
// afterwards if it cannot return to the original namespace, so no other goroutine ever runs there.
func (h Host) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), syscall.Gettid()))
		if err != nil {
			errc <- fmt.Errorf("open own netns: %w", err)
			runtime.UnlockOSThread()
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", h.NetNS))
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", h.NetNS, err)
			runtime.UnlockOSThread()
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter netns %s: %w", h.NetNS, err)
			runtime.UnlockOSThread()
			return
		}
		errc <- fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}

// Command builds a command that runs inside the host's namespace.
func (h Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.NetNS, name}, args...)...)
}

// DeleteBridge removes the bridge. Callers remove the hosts first.
func (n Net) DeleteBridge() error { return ip("link", "del", n.Bridge) }
