package localnet

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/vishvananda/netlink"
)

// A shared address is one that two hosts hold at once, as the reference module's CNI lets the
// two Pods of a migrating VM share the VM's address (network.deckhouse.io/pod-common-ip-priority):
// one of them gets the traffic. On this bridge the host that does not own it yet does not have
// it at all: it is made with an address of its own (AddHost) until ClaimShared gives it the
// shared one. (Holding
// it silently would not do: the owner's packets, whose source is the shared address, would be
// martians to a host that has that address too, so the two could not talk, and a migration
// goes between them.)

// ClaimShared makes host name's shared address want its own once no other host holds it: the
// address is added to its eth0 and announced, so the peers send its traffic here at once. It
// reports whether name holds it now.
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
	if err := ip("-n", self.NetNS, "addr", "replace", fmt.Sprintf("%s/%d", want, n.Subnet.Bits()), "dev", "eth0"); err != nil {
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
