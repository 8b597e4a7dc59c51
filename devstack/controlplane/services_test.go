package controlplane

import "testing"

func TestDefaultServiceCIDR(t *testing.T) {
	for _, c := range []struct {
		base      int
		cidr, dns string
	}{
		{0, "10.96.0.0/24", "10.96.0.10"},
		{6440, "10.121.40.0/24", "10.121.40.10"},
		{7440, "10.125.16.0/24", "10.125.16.10"},
		{8191, "10.127.255.0/24", "10.127.255.10"},
		{8192, "10.96.0.0/24", "10.96.0.10"},
		{20006, "10.110.38.0/24", "10.110.38.10"},
	} {
		got := DefaultServiceCIDR(c.base)
		if got.String() != c.cidr {
			t.Errorf("DefaultServiceCIDR(%d) = %s, want %s", c.base, got, c.cidr)
		}
		cfg := Config{ServiceCIDR: got.String()}
		if dns := cfg.ClusterDNSIP().String(); dns != c.dns {
			t.Errorf("ClusterDNSIP of %s = %s, want %s", got, dns, c.dns)
		}
		if !serviceSpace.Contains(got.Addr()) {
			t.Errorf("%s is outside %s", got, serviceSpace)
		}
	}
}
