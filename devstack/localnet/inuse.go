package localnet

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// addrsInUse are the IPv4 addresses configured in any of this package's namespaces, whether
// or not a host record names them: a namespace outlives its record when a process that made it
// was killed, or when another checkout with its own state directory made it, and handing its
// address out again would break both hosts.
func addrsInUse() (map[netip.Addr]bool, error) {
	entries, err := os.ReadDir("/run/netns")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list network namespaces: %w", err)
	}
	used := map[netip.Addr]bool{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), NetNSPrefix) {
			continue
		}
		addrs, err := nsAddrs(filepath.Join("/run/netns", e.Name()))
		if err != nil {
			// A namespace that goes away meanwhile holds nothing.
			continue
		}
		for _, a := range addrs {
			used[a] = true
		}
	}
	return used, nil
}

// netlinkAt is a netlink handle in the network namespace at path.
func netlinkAt(path string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

func nsAddrs(path string) ([]netip.Addr, error) {
	h, err := netlinkAt(path)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	list, err := h.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok {
			out = append(out, ip)
		}
	}
	return out, nil
}
