// Package ipam is the address arithmetic of virtual machine IP addresses: the range given by
// virtualMachineCIDRs, the free address to hand out, and the lease name that holds an address.
// It does no IO.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrOutOfRange is the error of an address that no subnet of the range may hand out.
var ErrOutOfRange = errors.New("the address is out of the valid range")

// ErrExhausted is the error of a range whose every address is taken.
var ErrExhausted = errors.New("no free address is left in the range")

// Range is the subnets of virtualMachineCIDRs, in the order given.
type Range struct {
	prefixes []netip.Prefix
}

// ParseRange parses IPv4 CIDRs. A CIDR with host bits set, an IPv6 CIDR or two overlapping
// subnets is an error naming it.
func ParseRange(cidrs []string) (Range, error) {
	var r Range
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return Range{}, fmt.Errorf("CIDR %q: %w", s, err)
		}
		if !p.Addr().Is4() {
			return Range{}, fmt.Errorf("CIDR %q: only IPv4 is supported", s)
		}
		if p.Masked() != p {
			return Range{}, fmt.Errorf("CIDR %q: host bits are set (the subnet is %s)", s, p.Masked())
		}
		for _, q := range r.prefixes {
			if q.Overlaps(p) {
				return Range{}, fmt.Errorf("CIDR %q overlaps %s", s, q)
			}
		}
		r.prefixes = append(r.prefixes, p)
	}
	return r, nil
}

// Empty says whether the range has no subnet.
func (r Range) Empty() bool { return len(r.prefixes) == 0 }

// String is the subnets, comma-separated.
func (r Range) String() string {
	s := make([]string, len(r.prefixes))
	for i, p := range r.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Contains says whether addr may be handed out: inside a subnet and, in a subnet of more than two
// addresses, neither its network nor its broadcast address.
func (r Range) Contains(addr netip.Addr) bool {
	for _, p := range r.prefixes {
		if usable(p, addr) {
			return true
		}
	}
	return false
}

// Check is nil for an address that Contains, ErrOutOfRange otherwise, and a parse error for a
// string that is no IPv4 address.
func (r Range) Check(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is4() {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 address", s)
	}
	if !r.Contains(addr) {
		return addr, fmt.Errorf("%s: %w", addr, ErrOutOfRange)
	}
	return addr, nil
}

func usable(p netip.Prefix, addr netip.Addr) bool {
	if !p.Contains(addr) {
		return false
	}
	if p.Bits() >= 31 {
		return true
	}
	return addr != p.Addr() && p.Contains(addr.Next())
}

// Free is the first address of the range, subnet by subnet in order, that is not taken.
func (r Range) Free(taken map[netip.Addr]bool) (netip.Addr, error) {
	for _, p := range r.prefixes {
		for a := p.Addr(); p.Contains(a); a = a.Next() {
			if usable(p, a) && !taken[a] {
				return a, nil
			}
		}
	}
	return netip.Addr{}, ErrExhausted
}

// Size is the number of addresses the range hands out.
func (r Range) Size() uint64 {
	var n uint64
	for _, p := range r.prefixes {
		size := uint64(1) << (32 - p.Bits())
		if p.Bits() < 31 {
			size -= 2
		}
		n += size
	}
	return n
}

// LeaseName is the name of the VirtualMachineIPAddressLease holding addr: ip-10-66-10-1.
func LeaseName(addr netip.Addr) string {
	return "ip-" + strings.ReplaceAll(addr.String(), ".", "-")
}

// ParseLeaseName is the address a lease name holds, the inverse of LeaseName.
func ParseLeaseName(name string) (netip.Addr, error) {
	rest, ok := strings.CutPrefix(name, "ip-")
	if !ok {
		return netip.Addr{}, fmt.Errorf("lease name %q: want ip-A-B-C-D", name)
	}
	addr, err := netip.ParseAddr(strings.ReplaceAll(rest, "-", "."))
	if err != nil || !addr.Is4() || LeaseName(addr) != name {
		return netip.Addr{}, fmt.Errorf("lease name %q: want ip-A-B-C-D", name)
	}
	return addr, nil
}
