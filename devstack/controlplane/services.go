package controlplane

import "net/netip"

// serviceSpace holds the stacks' Service ranges: one /24 each, chosen by the port base.
var serviceSpace = netip.MustParsePrefix("10.96.0.0/11")

// DefaultServiceCIDR is the Service range of the stack with this port base: the /24 number
// portBase mod 8192 of 10.96.0.0/11 (6440, the dev stack, gets 10.121.40.0/24). Two stacks on one
// machine never share a port base (etcd listens on 127.0.0.1:base), and port bases closer than
// 8192 never share a range, so the ClusterIPs of stacks side by side do not clash on the host that
// serves them all.
func DefaultServiceCIDR(portBase int) netip.Prefix {
	i := portBase % 8192
	b := serviceSpace.Addr().As4()
	b[1] += byte(i / 256)
	b[2] = byte(i % 256)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// ServicePrefix is the parsed ServiceCIDR (New has checked it).
func (c Config) ServicePrefix() netip.Prefix {
	p, _ := netip.ParsePrefix(c.ServiceCIDR)
	return p.Masked()
}

// ClusterDNSIP is the cluster DNS address, the Service kube-system/kube-dns: the tenth address of
// the Service range, as kubeadm chooses it.
func (c Config) ClusterDNSIP() netip.Addr {
	a := c.ServicePrefix().Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// ClusterDomain is the stack's DNS domain.
const ClusterDomain = "cluster.local"
