package localnet

import (
	"fmt"
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
