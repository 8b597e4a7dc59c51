package network

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table (family ip) that holds every rule of the binding. A table of its
// own is removed whole on teardown, and never touches rules that others keep in the Pod.
const TableName = "kubevirt_masquerade"

// The table's base chains, as KubeVirt's nat table has them.
const (
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainPostrouting = "postrouting"
)

// natAction is what a rule does to a matching packet.
type natAction int

const (
	actDNAT natAction = iota
	actSNAT
	actMasquerade
	// actAccept ends the chain for the packet: no address translation from this table.
	actAccept
)

// natRule is one rule of the table. Every match field is optional; the zero value matches any.
type natRule struct {
	chain string
	iif   string
	oif   string
	saddr netip.Addr
	daddr netip.Addr
	// local matches packets to any address of the Pod's own (fib daddr type local): the pod IP,
	// and an address the Pod shares with another Pod of the VM while it migrates.
	local  bool
	proto  Protocol
	dport  uint16
	action natAction
	// to is the new address for DNAT and SNAT.
	to netip.Addr
}

// String renders the rule in nft's syntax, for logs and tests.
func (r natRule) String() string {
	var b strings.Builder
	if r.iif != "" {
		fmt.Fprintf(&b, "iifname %q ", r.iif)
	}
	if r.oif != "" {
		fmt.Fprintf(&b, "oifname %q ", r.oif)
	}
	if r.saddr.IsValid() {
		fmt.Fprintf(&b, "ip saddr %s ", r.saddr)
	}
	if r.daddr.IsValid() {
		fmt.Fprintf(&b, "ip daddr %s ", r.daddr)
	}
	if r.local {
		b.WriteString("fib daddr type local ")
	}
	switch {
	case r.proto != "" && r.dport != 0:
		fmt.Fprintf(&b, "%s dport %d ", r.proto, r.dport)
	case r.proto != "":
		fmt.Fprintf(&b, "meta l4proto %s ", r.proto)
	}
	b.WriteString("counter ")
	switch r.action {
	case actDNAT:
		fmt.Fprintf(&b, "dnat to %s", r.to)
	case actSNAT:
		fmt.Fprintf(&b, "snat to %s", r.to)
	case actMasquerade:
		b.WriteString("masquerade")
	case actAccept:
		b.WriteString("accept")
	}
	return r.chain + ": " + b.String()
}

// ruleSet is the binding's rules.
type ruleSet []natRule

func (rs ruleSet) String() string {
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = r.String()
	}
	return strings.Join(lines, "\n")
}

// rulesFor builds the masquerade rules, which mirror KubeVirt's:
//
//   - TCP and UDP arriving on the pod interface for an address of the Pod go to the guest (only
//     the declared ports when the VMI lists any); the guest sees the real client address. KubeVirt
//     matches the pod IP alone; any local address also covers the VM's address that a migration
//     target shares and takes over (network.deckhouse.io/pod-common-ip-priority) while its pod IP
//     stays its own;
//   - the same for connections that the Pod itself opens to its pod IP or to 127.0.0.1 (what
//     `kubectl port-forward` does), SNATed to the gateway, since the guest could not answer a
//     loopback source;
//   - what the guest sends out leaves with the pod IP;
//   - the Pod's own ports (host) stay the Pod's: they are accepted before any DNAT, as KubeVirt
//     keeps the live migration ports out of the guest's forwarding.
func rulesFor(podIf, bridge string, podIP, gateway, guest netip.Addr, ports, host []Port) ruleSet {
	loopback := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	var match []natRule
	if len(ports) == 0 {
		match = []natRule{{proto: TCP}, {proto: UDP}}
	}
	for _, p := range ports {
		match = append(match, natRule{proto: p.Protocol, dport: p.Port})
	}
	var rs ruleSet
	for _, p := range host {
		rs = append(rs,
			natRule{chain: chainPrerouting, iif: podIf, local: true, proto: p.Protocol, dport: p.Port, action: actAccept},
			natRule{chain: chainOutput, daddr: podIP, proto: p.Protocol, dport: p.Port, action: actAccept})
	}
	for _, m := range match {
		m.action, m.to = actDNAT, guest
		in := m
		in.chain, in.iif, in.local = chainPrerouting, podIf, true
		rs = append(rs, in)
	}
	for _, dst := range []netip.Addr{podIP, loopback} {
		for _, m := range match {
			m.action, m.to = actDNAT, guest
			out := m
			out.chain, out.daddr = chainOutput, dst
			rs = append(rs, out)
		}
	}
	for _, m := range match {
		m.action, m.to = actSNAT, gateway
		post := m
		post.chain, post.oif, post.saddr = chainPostrouting, bridge, loopback
		rs = append(rs, post)
	}
	rs = append(rs, natRule{chain: chainPostrouting, saddr: guest, action: actMasquerade})
	return rs
}

// exprs compiles the rule into nftables expressions (what `nft` would send for String()).
func (r natRule) exprs() ([]expr.Any, error) {
	var e []expr.Any
	cmp := func(data []byte) expr.Any { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data} }
	if r.iif != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, cmp(ifname(r.iif)))
	}
	if r.oif != "" {
		e = append(e, &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, cmp(ifname(r.oif)))
	}
	// Offsets in the IPv4 header: source address at 12, destination at 16.
	for _, a := range []struct {
		addr   netip.Addr
		offset uint32
	}{{r.saddr, 12}, {r.daddr, 16}} {
		if !a.addr.IsValid() {
			continue
		}
		if !a.addr.Is4() {
			return nil, fmt.Errorf("rule %s: %s is not IPv4", r, a.addr)
		}
		v := a.addr.As4()
		e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: a.offset, Len: 4}, cmp(v[:]))
	}
	if r.local {
		e = append(e, &expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)})
	}
	if r.proto != "" {
		var p byte
		switch r.proto {
		case TCP:
			p = unix.IPPROTO_TCP
		case UDP:
			p = unix.IPPROTO_UDP
		default:
			return nil, fmt.Errorf("rule %s: protocol %q", r, r.proto)
		}
		e = append(e, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmp([]byte{p}))
		if r.dport != 0 {
			// The destination port sits at offset 2 of both the TCP and the UDP header.
			e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				cmp(binaryutil.BigEndian.PutUint16(r.dport)))
		}
	} else if r.dport != 0 {
		return nil, fmt.Errorf("rule %s: a port without a protocol", r)
	}
	e = append(e, &expr.Counter{})
	switch r.action {
	case actDNAT, actSNAT:
		if !r.to.Is4() {
			return nil, fmt.Errorf("rule %s: NAT target %s is not IPv4", r, r.to)
		}
		typ := expr.NATTypeDestNAT
		if r.action == actSNAT {
			typ = expr.NATTypeSourceNAT
		}
		v := r.to.As4()
		e = append(e,
			&expr.Immediate{Register: 1, Data: v[:]},
			&expr.NAT{Type: typ, Family: unix.NFPROTO_IPV4, RegAddrMin: 1})
	case actMasquerade:
		e = append(e, &expr.Masq{})
	case actAccept:
		e = append(e, &expr.Verdict{Kind: expr.VerdictAccept})
	default:
		return nil, fmt.Errorf("rule %s: unknown action %d", r, r.action)
	}
	return e, nil
}

// ifname is an interface name as the kernel compares it: NUL-padded to IFNAMSIZ.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

// chains are the table's base chains with their hooks: DNAT before routing (prerouting, and
// output for the Pod's own connections), SNAT after it.
func chains(t *nftables.Table) map[string]*nftables.Chain {
	accept := nftables.ChainPolicyAccept
	mk := func(name string, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeNAT, Hooknum: hook, Priority: prio, Policy: &accept}
	}
	return map[string]*nftables.Chain{
		chainPrerouting:  mk(chainPrerouting, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest),
		chainOutput:      mk(chainOutput, nftables.ChainHookOutput, nftables.ChainPriorityNATDest),
		chainPostrouting: mk(chainPostrouting, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource),
	}
}

// applyRules replaces the binding's table with rs in one transaction: a table left by an earlier
// launcher in this Pod is dropped in the same batch, so there is never a moment with both.
func applyRules(rs ruleSet) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	if err := dropTable(c); err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName})
	cs := chains(t)
	for _, name := range []string{chainPrerouting, chainOutput, chainPostrouting} {
		c.AddChain(cs[name])
	}
	for _, r := range rs {
		e, err := r.exprs()
		if err != nil {
			return err
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: cs[r.chain], Exprs: e})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: install table %s: %w", TableName, err)
	}
	return nil
}

// dropTable queues the deletion of the binding's table if it exists.
func dropTable(c *nftables.Conn) error {
	_, err := c.ListTableOfFamily(TableName, nftables.TableFamilyIPv4)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("nftables: look up table %s: %w", TableName, err)
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName})
	return nil
}

// removeRules deletes the binding's table, if there is one.
func removeRules() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	if err := dropTable(c); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: delete table %s: %w", TableName, err)
	}
	return nil
}
