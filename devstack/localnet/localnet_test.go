package localnet

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestVethNamesFitLinuxLimit(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range []string{"a", "aggapi-0a1b2c", "a-very-long-host-name-that-goes-on-and-on"} {
		outer, inner := vethNames(name)
		for _, n := range []string{outer, inner} {
			if len(n) > 15 {
				t.Errorf("%q: interface name %q longer than 15 bytes", name, n)
			}
			if seen[n] {
				t.Errorf("%q: interface name %q collides", name, n)
			}
			seen[n] = true
		}
	}
}

func TestFreeAddrSkipsGatewayAndTakenAddresses(t *testing.T) {
	dir := t.TempDir()
	n := Net{Bridge: "unused", Subnet: netip.MustParsePrefix("10.9.0.0/29"), StateDir: dir}
	if err := os.MkdirAll(n.hostsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.9.0.2", "10.9.0.3", "10.9.0.4", "10.9.0.5", "10.9.0.6"}
	for i, w := range want {
		got, err := n.freeAddr()
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if got.String() != w {
			t.Fatalf("allocation %d = %s, want %s", i, got, w)
		}
		if err := os.WriteFile(filepath.Join(n.hostsDir(), "h"+w), []byte(w), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.freeAddr(); err == nil {
		t.Fatal("a full subnet handed out the broadcast address")
	}
}

func TestDefaultValidatesSubnet(t *testing.T) {
	for _, tc := range []struct {
		subnet string
		ok     bool
	}{{"10.213.0.0/24", true}, {"10.213.0.7/24", true}, {"fd00::/64", false}, {"10.0.0.0/31", false}, {"bogus", false}} {
		t.Setenv("D8V_SUBNET", tc.subnet)
		n, err := Default()
		if (err == nil) != tc.ok {
			t.Errorf("subnet %s: err = %v, want ok=%v", tc.subnet, err, tc.ok)
		}
		if err == nil && n.GatewayIP().String() != "10.213.0.1" {
			t.Errorf("subnet %s: gateway %s", tc.subnet, n.GatewayIP())
		}
	}
}

// A namespace of ours that holds an address without a record (its maker was killed, or another
// checkout made it) keeps that address.
func TestFreeAddrSkipsAddressesOfUnrecordedNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	n := Net{Bridge: "unused", Subnet: netip.MustParsePrefix("10.9.0.0/29"), StateDir: t.TempDir()}
	if err := os.MkdirAll(n.hostsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("%sorphan-test-%d", NetNSPrefix, os.Getpid())
	t.Cleanup(func() { _ = ip("netns", "del", ns) })
	for _, step := range [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "add", "orphan0", "type", "veth", "peer", "name", "orphan1"},
		{"-n", ns, "addr", "add", "10.9.0.2/29", "dev", "orphan0"},
	} {
		if err := ip(step...); err != nil {
			t.Fatal(err)
		}
	}
	got, err := n.freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != "10.9.0.3" {
		t.Fatalf("free address %s, want 10.9.0.3: 10.9.0.2 is held by %s", got, ns)
	}
}

func TestNextAddrGoesRoundRobin(t *testing.T) {
	subnet := netip.MustParsePrefix("10.9.0.0/29") // .1 gateway, .2-.6 hosts, .7 broadcast
	addr := netip.MustParseAddr
	set := func(as ...string) map[netip.Addr]bool {
		m := map[netip.Addr]bool{}
		for _, a := range as {
			m[addr(a)] = true
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		last  netip.Addr
		taken map[netip.Addr]bool
		want  string // empty: no free address
	}{
		{"nothing handed out yet", netip.Addr{}, nil, "10.9.0.2"},
		{"after the last one", addr("10.9.0.3"), nil, "10.9.0.4"},
		{"a freed address waits its turn", addr("10.9.0.4"), set("10.9.0.2"), "10.9.0.5"},
		{"skips taken addresses", addr("10.9.0.2"), set("10.9.0.3", "10.9.0.4"), "10.9.0.5"},
		{"wraps before the broadcast address", addr("10.9.0.6"), nil, "10.9.0.2"},
		{"wraps past taken addresses", addr("10.9.0.5"), set("10.9.0.6", "10.9.0.2"), "10.9.0.3"},
		{"the last one again when it is the only free one", addr("10.9.0.4"), set("10.9.0.2", "10.9.0.3", "10.9.0.5", "10.9.0.6"), "10.9.0.4"},
		{"a last address from another subnet starts over", addr("10.8.0.9"), nil, "10.9.0.2"},
		{"a full subnet", addr("10.9.0.2"), set("10.9.0.2", "10.9.0.3", "10.9.0.4", "10.9.0.5", "10.9.0.6"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nextAddr(subnet, tc.last, tc.taken)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("got %s from a full subnet", got)
			case tc.want != "" && err != nil:
				t.Fatalf("error %v, want %s", err, tc.want)
			case tc.want != "" && got.String() != tc.want:
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestGarpFrame(t *testing.T) {
	mac := net.HardwareAddr{0x02, 0x42, 0xac, 0x11, 0x00, 0x02}
	got, err := garpFrame(mac, netip.MustParseAddr("10.213.0.7"))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x42, 0xac, 0x11, 0x00, 0x02, 0x08, 0x06, // Ethernet
		0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01, // Ethernet/IPv4, request
		0x02, 0x42, 0xac, 0x11, 0x00, 0x02, 10, 213, 0, 7, // sender
		0, 0, 0, 0, 0, 0, 10, 213, 0, 7, // target: the same address
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame\n got %x\nwant %x", got, want)
	}
	for _, tc := range []struct {
		mac net.HardwareAddr
		ip  string
	}{{mac[:4], "10.0.0.1"}, {mac, "fd00::1"}} {
		if _, err := garpFrame(tc.mac, netip.MustParseAddr(tc.ip)); err == nil {
			t.Errorf("garpFrame(%s, %s) accepted", tc.mac, tc.ip)
		}
	}
}
