package network

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

func TestRulesFor(t *testing.T) {
	podIP := netip.MustParseAddr("10.213.0.5")
	for _, tc := range []struct {
		name  string
		ports []Port
		host  []Port
		want  string
	}{
		{
			name: "no ports: every TCP and UDP port",
			want: `
prerouting: iifname "eth0" fib daddr type local meta l4proto tcp counter dnat to 10.0.2.2
prerouting: iifname "eth0" fib daddr type local meta l4proto udp counter dnat to 10.0.2.2
output: ip daddr 10.213.0.5 meta l4proto tcp counter dnat to 10.0.2.2
output: ip daddr 10.213.0.5 meta l4proto udp counter dnat to 10.0.2.2
output: ip daddr 127.0.0.1 meta l4proto tcp counter dnat to 10.0.2.2
output: ip daddr 127.0.0.1 meta l4proto udp counter dnat to 10.0.2.2
postrouting: oifname "k6t-eth0" ip saddr 127.0.0.1 meta l4proto tcp counter snat to 10.0.2.1
postrouting: oifname "k6t-eth0" ip saddr 127.0.0.1 meta l4proto udp counter snat to 10.0.2.1
postrouting: ip saddr 10.0.2.2 counter masquerade`,
		},
		{
			name:  "declared ports only",
			ports: []Port{{TCP, 80}, {UDP, 53}},
			want: `
prerouting: iifname "eth0" fib daddr type local tcp dport 80 counter dnat to 10.0.2.2
prerouting: iifname "eth0" fib daddr type local udp dport 53 counter dnat to 10.0.2.2
output: ip daddr 10.213.0.5 tcp dport 80 counter dnat to 10.0.2.2
output: ip daddr 10.213.0.5 udp dport 53 counter dnat to 10.0.2.2
output: ip daddr 127.0.0.1 tcp dport 80 counter dnat to 10.0.2.2
output: ip daddr 127.0.0.1 udp dport 53 counter dnat to 10.0.2.2
postrouting: oifname "k6t-eth0" ip saddr 127.0.0.1 tcp dport 80 counter snat to 10.0.2.1
postrouting: oifname "k6t-eth0" ip saddr 127.0.0.1 udp dport 53 counter snat to 10.0.2.1
postrouting: ip saddr 10.0.2.2 counter masquerade`,
		},
		{
			name: "the Pod's own ports stay out of the forwarding",
			host: []Port{{TCP, 22222}, {TCP, 49152}},
			want: `
prerouting: iifname "eth0" fib daddr type local tcp dport 22222 counter accept
output: ip daddr 10.213.0.5 tcp dport 22222 counter accept
prerouting: iifname "eth0" fib daddr type local tcp dport 49152 counter accept
output: ip daddr 10.213.0.5 tcp dport 49152 counter accept
prerouting: iifname "eth0" fib daddr type local meta l4proto tcp counter dnat to 10.0.2.2
prerouting: iifname "eth0" fib daddr type local meta l4proto udp counter dnat to 10.0.2.2
output: ip daddr 10.213.0.5 meta l4proto tcp counter dnat to 10.0.2.2
output: ip daddr 10.213.0.5 meta l4proto udp counter dnat to 10.0.2.2
output: ip daddr 127.0.0.1 meta l4proto tcp counter dnat to 10.0.2.2
output: ip daddr 127.0.0.1 meta l4proto udp counter dnat to 10.0.2.2
postrouting: oifname "k6t-eth0" ip saddr 127.0.0.1 meta l4proto tcp counter snat to 10.0.2.1
postrouting: oifname "k6t-eth0" ip saddr 127.0.0.1 meta l4proto udp counter snat to 10.0.2.1
postrouting: ip saddr 10.0.2.2 counter masquerade`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := rulesFor("eth0", BridgeName, podIP, GatewayPrefix.Addr(), GuestPrefix.Addr(), tc.ports, tc.host)
			if got, want := rs.String(), strings.TrimSpace(tc.want); got != want {
				t.Errorf("rules:\n%s\nwant:\n%s", got, want)
			}
			for _, r := range rs {
				if _, err := r.exprs(); err != nil {
					t.Errorf("rule %s does not compile: %v", r, err)
				}
			}
		})
	}
}

func TestRuleExprs(t *testing.T) {
	r := natRule{chain: chainPrerouting, iif: "eth0", daddr: netip.MustParseAddr("10.213.0.5"), proto: TCP, dport: 8080,
		action: actDNAT, to: GuestPrefix.Addr()}
	got, err := r.exprs()
	if err != nil {
		t.Fatal(err)
	}
	// What `nft add rule ip t prerouting iifname "eth0" ip daddr 10.213.0.5 tcp dport 8080 counter
	// dnat to 10.0.2.2` compiles to.
	want := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte("eth0\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{10, 213, 0, 5}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x1f, 0x90}},
		&expr.Counter{},
		&expr.Immediate{Register: 1, Data: []byte{10, 0, 2, 2}},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: 2, RegAddrMin: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exprs:\n%#v\nwant:\n%#v", got, want)
	}

	// `... iifname "eth0" fib daddr type local ...`: the address type of the destination's route,
	// RTN_LOCAL in the host's byte order.
	local := natRule{chain: chainPrerouting, iif: "eth0", local: true, proto: TCP, dport: 8080, action: actDNAT, to: GuestPrefix.Addr()}
	got, err = local.exprs()
	if err != nil {
		t.Fatal(err)
	}
	fib := []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
	}
	if !reflect.DeepEqual(got[2:4], fib) || !reflect.DeepEqual(got[4:], want[4:]) {
		t.Errorf("exprs of a local rule:\n%#v", got)
	}

	for _, bad := range []natRule{
		{chain: chainOutput, daddr: netip.MustParseAddr("fd00::1"), action: actDNAT, to: GuestPrefix.Addr()},
		{chain: chainOutput, dport: 80, action: actDNAT, to: GuestPrefix.Addr()},
		{chain: chainOutput, proto: "sctp", action: actDNAT, to: GuestPrefix.Addr()},
		{chain: chainOutput, action: actSNAT},
	} {
		if _, err := bad.exprs(); err == nil {
			t.Errorf("rule %s compiled, want an error", bad)
		}
	}
}
