package localnet

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
)

// A shared address is one that two hosts hold at once, as the reference module's CNI lets the
// two Pods of a migrating VM share the VM's address (network.deckhouse.io/pod-common-ip-priority):
// one of them gets the traffic. On this bridge the host that does not own it yet keeps it on its
// loopback, where it is local (a packet to it is the host's) but answers no ARP on eth0
// (arp_ignore 1), and has an address of its own for everything else. ClaimShared moves it to
// eth0 and announces it once its holder is gone.

// AddSharingHost creates the namespace for name with a free address of its own and want, an
// address another host holds, kept silent until ClaimShared. A host of that name that exists
// is returned as it is.
func (n Net) AddSharingHost(name string, want netip.Addr) (Host, error) {
	h, err := n.AddHost(name)
	if err != nil {
		return Host{}, err
	}
	if err := h.Do(func() error { return setARPIgnore("eth0", 1) }); err != nil {
		return Host{}, fmt.Errorf("host %s: silence shared address %s: %w", name, want, err)
	}
	if err := ip("-n", h.NetNS, "addr", "replace", want.String()+"/32", "dev", "lo"); err != nil {
		return Host{}, fmt.Errorf("host %s: shared address %s: %w", name, want, err)
	}
	return h, nil
}

// ClaimShared makes host name's shared address want its own once no other host holds it: the
// address moves from the loopback to eth0, answers ARP again and is announced, so the peers send
// its traffic here at once. It reports whether name holds it now.
func (n Net) ClaimShared(name string, want netip.Addr) (bool, error) {
	unlock, err := n.lock()
	if err != nil {
		return false, err
	}
	defer unlock()
	hosts, err := n.Hosts()
	if err != nil {
		return false, err
	}
	var self Host
	for _, h := range hosts {
		if h.Name == name {
			self = h
			continue
		}
		// The holder: the host that got want as its own address, or one that shared and claimed
		// it (want on its eth0 next to its own address).
		if h.IP == want {
			return false, nil
		}
		if held, err := nsHoldsOnEth0(h.NetNS, want); err == nil && held {
			return false, nil
		}
	}
	if self.Name == "" {
		return false, fmt.Errorf("host %s: not found", name)
	}
	steps := [][]string{
		{"-n", self.NetNS, "addr", "del", want.String() + "/32", "dev", "lo"},
		{"-n", self.NetNS, "addr", "replace", fmt.Sprintf("%s/%d", want, n.Subnet.Bits()), "dev", "eth0"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return false, fmt.Errorf("host %s: claim %s: %w", name, want, err)
		}
	}
	if err := self.Do(func() error { return setARPIgnore("eth0", 0) }); err != nil {
		return false, fmt.Errorf("host %s: claim %s: %w", name, want, err)
	}
	// The old holder's MAC may still be in the machine's and the peers' neighbour tables.
	_ = ip("neigh", "flush", "to", want.String(), "dev", n.Bridge)
	if err := n.announce(Host{Name: self.Name, NetNS: self.NetNS, IP: want}); err != nil {
		return false, err
	}
	return true, nil
}

// nsHoldsOnEth0 reports whether the network namespace ns has addr on its eth0.
func nsHoldsOnEth0(ns string, addr netip.Addr) (bool, error) {
	h, err := netlinkAt(filepath.Join("/run/netns", ns))
	if err != nil {
		return false, err
	}
	defer h.Close()
	link, err := h.LinkByName("eth0")
	if err != nil {
		return false, err
	}
	list, err := h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return false, err
	}
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && ip == addr {
			return true, nil
		}
	}
	return false, nil
}

// setARPIgnore sets the current network namespace's arp_ignore of dev: 1 answers ARP only for
// the addresses on dev itself, 0 for any of the namespace's.
func setARPIgnore(dev string, v int) error {
	return os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/arp_ignore", []byte(fmt.Sprint(v)), 0o644)
}
