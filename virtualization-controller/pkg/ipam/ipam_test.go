package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		cidrs   []string
		want    string
		wantErr string
	}{
		{cidrs: nil, want: ""},
		{cidrs: []string{"10.66.10.0/24", "10.66.20.0/24"}, want: "10.66.10.0/24,10.66.20.0/24"},
		{cidrs: []string{"10.66.10.1/24"}, wantErr: `CIDR "10.66.10.1/24": host bits are set (the subnet is 10.66.10.0/24)`},
		{cidrs: []string{"fd00::/64"}, wantErr: `CIDR "fd00::/64": only IPv4 is supported`},
		{cidrs: []string{"10.66.0.0/16", "10.66.10.0/24"}, wantErr: `CIDR "10.66.10.0/24" overlaps 10.66.0.0/16`},
		{cidrs: []string{"10.66.10.0/33"}, wantErr: `CIDR "10.66.10.0/33": netip.ParsePrefix("10.66.10.0/33"): prefix length out of range`},
	} {
		r, err := ParseRange(tc.cidrs)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("ParseRange(%q) = %v, want error %q", tc.cidrs, err, tc.wantErr)
			}
			continue
		}
		if err != nil || r.String() != tc.want {
			t.Errorf("ParseRange(%q) = %q, %v; want %q", tc.cidrs, r, err, tc.want)
		}
	}
}

func TestContains(t *testing.T) {
	r := mustRange(t, "10.66.10.0/24", "10.66.20.4/31", "10.66.30.7/32")
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"10.66.10.0", false}, // network
		{"10.66.10.1", true},
		{"10.66.10.254", true},
		{"10.66.10.255", false}, // broadcast
		{"10.66.11.1", false},
		{"10.66.20.4", true}, // a /31 has no network or broadcast address
		{"10.66.20.5", true},
		{"10.66.20.6", false},
		{"10.66.30.7", true},
	} {
		if got := r.Contains(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Contains(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	r := mustRange(t, "10.66.10.0/24")
	for _, tc := range []struct {
		in      string
		wantErr string
		isRange bool
	}{
		{in: "10.66.10.7"},
		{in: "10.66.11.7", wantErr: "10.66.11.7: the address is out of the valid range", isRange: true},
		{in: "10.66.10.255", wantErr: "10.66.10.255: the address is out of the valid range", isRange: true},
		{in: "fd00::1", wantErr: `"fd00::1" is not an IPv4 address`},
		{in: "10.66.10", wantErr: `"10.66.10" is not an IPv4 address`},
	} {
		_, err := r.Check(tc.in)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("Check(%q) = %v", tc.in, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.wantErr || errors.Is(err, ErrOutOfRange) != tc.isRange {
			t.Errorf("Check(%q) = %v, want %q (out of range: %v)", tc.in, err, tc.wantErr, tc.isRange)
		}
	}
}

func TestFree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cidrs   []string
		taken   []string
		want    string
		wantErr error
	}{
		{name: "first host", cidrs: []string{"10.66.10.0/24"}, want: "10.66.10.1"},
		{name: "skips taken", cidrs: []string{"10.66.10.0/24"}, taken: []string{"10.66.10.1", "10.66.10.2"}, want: "10.66.10.3"},
		{name: "next subnet", cidrs: []string{"10.66.10.0/30", "10.66.20.0/24"}, taken: []string{"10.66.10.1", "10.66.10.2"}, want: "10.66.20.1"},
		{name: "a /32", cidrs: []string{"10.66.30.7/32"}, want: "10.66.30.7"},
		{name: "exhausted", cidrs: []string{"10.66.10.0/30"}, taken: []string{"10.66.10.1", "10.66.10.2"}, wantErr: ErrExhausted},
		{name: "empty", wantErr: ErrExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[netip.Addr]bool{}
			for _, a := range tc.taken {
				taken[netip.MustParseAddr(a)] = true
			}
			got, err := mustRange(t, tc.cidrs...).Free(taken)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Free = %v, %v; want %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got.String() != tc.want {
				t.Fatalf("Free = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestFreeHandsOutEveryAddressOnce(t *testing.T) {
	r := mustRange(t, "10.66.10.0/25", "10.66.20.0/30", "10.66.30.1/32")
	taken := map[netip.Addr]bool{}
	for range r.Size() {
		a, err := r.Free(taken)
		if err != nil {
			t.Fatalf("after %d: %v", len(taken), err)
		}
		if taken[a] || !r.Contains(a) {
			t.Fatalf("handed out %s twice or outside the range", a)
		}
		taken[a] = true
	}
	if a, err := r.Free(taken); !errors.Is(err, ErrExhausted) {
		t.Fatalf("after %d addresses: %v, %v; want exhausted", r.Size(), a, err)
	}
	if r.Size() != 126+2+1 {
		t.Fatalf("Size = %d", r.Size())
	}
}

func TestLeaseName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    string
		wantErr bool
	}{
		{name: "ip-10-66-10-1", want: "10.66.10.1"},
		{name: "ip-255-255-255-255", want: "255.255.255.255"},
		{name: "ip-10-66-10-01", wantErr: true},
		{name: "ip-10-66-10", wantErr: true},
		{name: "10-66-10-1", wantErr: true},
		{name: "ip-10.66.10.1", wantErr: true},
		{name: "ip-::1", wantErr: true},
	} {
		got, err := ParseLeaseName(tc.name)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseLeaseName(%q) = %v, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || got.String() != tc.want || LeaseName(got) != tc.name {
			t.Errorf("ParseLeaseName(%q) = %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
}

func FuzzParseLeaseName(f *testing.F) {
	for _, s := range []string{"ip-10-66-10-1", "ip-0-0-0-0", "ip-1-2-3", "ip--1-2-3-4", "ip-01-2-3-4", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		addr, err := ParseLeaseName(name)
		if err != nil {
			return
		}
		if !addr.Is4() || LeaseName(addr) != name || !strings.HasPrefix(name, "ip-") {
			t.Fatalf("ParseLeaseName(%q) = %v does not round-trip (%q)", name, addr, LeaseName(addr))
		}
	})
}

func mustRange(t *testing.T, cidrs ...string) Range {
	t.Helper()
	r, err := ParseRange(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
