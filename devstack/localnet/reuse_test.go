package localnet

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A peer that talked to a host (as virt-handler talks to a launcher Pod) dials the next holder of
// the same address and connects at once: the new holder's announcement replaced the old MAC in
// the peer's neighbour table. The network is a bridge of its own with a subnet of five addresses,
// so that the round-robin allocator comes back to the freed address within the test.
func TestReusedAddressReachesTheNewHolderAtOnce(t *testing.T) {
	n := privateNet(t, "d8vt", "10.213.%d.0/29")
	pid := os.Getpid()
	add := func(role string) Host {
		t.Helper()
		h, err := n.AddHost(fmt.Sprintf("reuse-%s-%d", role, pid))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	peer, old := add("peer"), add("old")
	addr := netip.AddrPortFrom(old.IP, 8080).String()
	serve(t, old, addr)
	if err := dial(peer, addr, 2*time.Second); err != nil {
		t.Fatalf("peer cannot reach the first holder: %v", err)
	}
	oldMAC := mac(t, old)
	if got := neighbour(t, peer, old.IP); got.String() != oldMAC.String() {
		t.Fatalf("peer's neighbour entry for %s is %s, want the first holder's %s", old.IP, got, oldMAC)
	}

	if err := n.DeleteHost(old.Name); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if h := add(fmt.Sprintf("fill%d", i)); h.IP == old.IP {
			t.Fatalf("the freed address %s was handed out again at once", old.IP)
		}
	}
	reused := add("new")
	if reused.IP != old.IP {
		t.Fatalf("the last free address is %s, want the freed %s", reused.IP, old.IP)
	}
	newMAC := mac(t, reused)
	if newMAC.String() == oldMAC.String() {
		t.Fatalf("both holders have MAC %s", newMAC)
	}
	serve(t, reused, addr)
	start := time.Now()
	if err := dial(peer, addr, time.Second); err != nil {
		t.Fatalf("peer dials the new holder of %s: %v (its neighbour entry: %s, the new MAC %s)", old.IP, err, neighbour(t, peer, old.IP), newMAC)
	}
	t.Logf("connected to the new holder in %s", time.Since(start))
	if got := neighbour(t, peer, old.IP); got.String() != newMAC.String() {
		t.Errorf("peer's neighbour entry for %s is %s, want the new holder's %s", old.IP, got, newMAC)
	}
}

// privateNet is a network of its own for a test (root only): bridge prefix+pid, and subnet, a
// pattern whose %d the pid picks, so that parallel test binaries do not meet; every host and the
// bridge go when the test ends.
func privateNet(t *testing.T, prefix, subnet string) Net {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	pid := os.Getpid()
	n := Net{
		Bridge:   fmt.Sprintf("%s%d", prefix, pid%1000000),
		Subnet:   netip.MustParsePrefix(fmt.Sprintf(subnet, 100+pid%100)),
		StateDir: t.TempDir(),
	}
	t.Cleanup(func() {
		hosts, _ := n.Hosts()
		for _, h := range hosts {
			if err := n.DeleteHost(h.Name); err != nil {
				t.Error(err)
			}
		}
		if err := n.DeleteBridge(); err != nil {
			t.Error(err)
		}
	})
	return n
}

func serve(t *testing.T, h Host, addr string) {
	t.Helper()
	ln, err := h.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

func dial(from Host, addr string, timeout time.Duration) error {
	return from.Do(func() error {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

func mac(t *testing.T, h Host) net.HardwareAddr {
	t.Helper()
	var hw net.HardwareAddr
	if err := h.Do(func() error {
		eth0, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		hw = eth0.HardwareAddr
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return hw
}

// neighbour is the MAC that h's neighbour table holds for ip, nil without an entry.
func neighbour(t *testing.T, h Host, ip netip.Addr) net.HardwareAddr {
	t.Helper()
	ns, err := netns.GetFromPath(filepath.Join("/run/netns", h.NetNS))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	list, err := nh.NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if a, ok := netip.AddrFromSlice(e.IP.To4()); ok && a == ip {
			return e.HardwareAddr
		}
	}
	return nil
}
