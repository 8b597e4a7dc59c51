package localnet

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequestedAddresses(t *testing.T) {
	n := Net{Bridge: "unused", Subnet: netip.MustParsePrefix("10.9.0.0/28"), Requested: netip.MustParsePrefix("10.9.0.12/30"), StateDir: t.TempDir()}
	if err := os.MkdirAll(n.hostsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	// AddHost's addresses never come from Requested.
	for range 20 {
		a, err := n.freeAddr()
		if err != nil {
			t.Fatal(err)
		}
		if n.Requested.Contains(a) {
			t.Fatalf("freeAddr handed out %s of the requested range %s", a, n.Requested)
		}
	}
	if err := os.WriteFile(filepath.Join(n.hostsDir(), "holder"), []byte("10.9.0.13"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want, err string
	}{
		{name: "vm", want: "10.9.0.12"},
		{name: "vm", want: "10.9.0.13", err: "requested address 10.9.0.13: the address is taken by host holder"},
		{name: "holder", want: "10.9.0.13"}, // its own
		{name: "vm", want: "10.9.0.1", err: "not a host address of the subnet 10.9.0.0/28"},
		{name: "vm", want: "10.9.0.15", err: "not a host address of the subnet 10.9.0.0/28"},
		{name: "vm", want: "10.9.1.2", err: "not a host address of the subnet 10.9.0.0/28"},
	} {
		got, err := n.requestedAddr(tc.name, netip.MustParseAddr(tc.want))
		if tc.err == "" {
			if err != nil || got.String() != tc.want {
				t.Errorf("%s %s: %v, %v", tc.name, tc.want, got, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s %s: %v, want %q", tc.name, tc.want, err, tc.err)
		}
	}
	if _, err := n.requestedAddr("vm", netip.MustParseAddr("10.9.0.13")); !errors.Is(err, ErrAddrTaken) {
		t.Errorf("a taken address is not ErrAddrTaken: %v", err)
	}
}

func TestDefaultRequested(t *testing.T) {
	t.Setenv("D8V_SUBNET", "10.213.0.0/24")
	n, err := Default()
	if err != nil || n.Requested.String() != "10.213.0.192/26" {
		t.Fatalf("Requested = %s, %v", n.Requested, err)
	}
	t.Setenv("D8V_REQUESTED_SUBNET", "10.213.0.128/25")
	if n, err = Default(); err != nil || n.Requested.String() != "10.213.0.128/25" {
		t.Fatalf("Requested = %s, %v", n.Requested, err)
	}
	t.Setenv("D8V_REQUESTED_SUBNET", "10.214.0.0/26")
	if _, err = Default(); err == nil {
		t.Fatal("a requested subnet outside the subnet was accepted")
	}
}
