package network

import (
	"bytes"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

var guestMAC = net.HardwareAddr{0x02, 0xd8, 0x76, 0, 0, 1}

// discover is what busybox udhcpc sends first, trimmed to what matters.
func discover() *Message {
	return &Message{
		Op: OpRequest, HType: 1, XID: 0x1234abcd, Flags: 0, CHAddr: guestMAC,
		Options: map[byte][]byte{
			OptMessageType:  {byte(Discover)},
			OptClientID:     append([]byte{1}, guestMAC...),
			OptParamRequest: {OptSubnetMask, OptRouter, OptDNS, OptHostname, OptDomainName, OptDomainSearch},
		},
	}
}

func testLease() Lease {
	return Lease{
		ClientMAC: guestMAC,
		Addr:      GuestPrefix,
		Router:    GatewayPrefix.Addr(),
		ServerID:  GatewayPrefix.Addr(),
		DNS:       []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.11")},
		Search:    []string{"ns1.svc.cluster.local", "svc.cluster.local"},
		Hostname:  "vm1",
		MTU:       1450,
		Duration:  LeaseTime,
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  *Message
	}{
		{name: "discover", msg: discover()},
		{name: "reply with addresses and names", msg: &Message{
			Op: OpReply, HType: 1, Hops: 1, XID: 7, Secs: 3, Flags: Broadcast,
			CIAddr: netip.MustParseAddr("10.0.2.2"), YIAddr: netip.MustParseAddr("10.0.2.2"),
			SIAddr: netip.MustParseAddr("10.0.2.1"), GIAddr: netip.MustParseAddr("0.0.0.0"),
			CHAddr: guestMAC, SName: "server", File: "boot/pxelinux.0",
			Options: map[byte][]byte{OptMessageType: {byte(Ack)}, OptHostname: []byte("vm1")},
		}},
		{name: "option longer than 255 bytes is split and joined (RFC 3396)", msg: &Message{
			Op: OpReply, HType: 1, CHAddr: guestMAC,
			Options: map[byte][]byte{OptDomainSearch: bytes.Repeat([]byte{3, 'a', 'b', 'c', 0}, 120)},
		}},
		{name: "empty option value", msg: &Message{
			Op: OpRequest, HType: 1, CHAddr: guestMAC, Options: map[byte][]byte{OptHostname: {}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.msg.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if len(b) < minMessageLen {
				t.Errorf("encoded %d bytes, want at least %d", len(b), minMessageLen)
			}
			got, err := ParseMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			want := *tc.msg
			// Unset addresses travel as 0.0.0.0.
			for _, a := range []*netip.Addr{&want.CIAddr, &want.YIAddr, &want.SIAddr, &want.GIAddr} {
				if !a.IsValid() {
					*a = netip.IPv4Unspecified()
				}
			}
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, &want)
			}
		})
	}
}

func TestMarshalLayout(t *testing.T) {
	m := &Message{
		Op: OpReply, HType: 1, XID: 0x01020304, CHAddr: guestMAC, YIAddr: netip.MustParseAddr("10.0.2.2"),
		Options: map[byte][]byte{OptRouter: {10, 0, 2, 1}, OptMessageType: {byte(Offer)}, OptSubnetMask: {255, 255, 255, 0}},
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		off  int
		want []byte
	}{
		{"op, htype, hlen, hops", 0, []byte{2, 1, 6, 0}},
		{"xid", 4, []byte{1, 2, 3, 4}},
		{"yiaddr", 16, []byte{10, 0, 2, 2}},
		{"chaddr", 28, guestMAC},
		{"magic cookie", 236, []byte{99, 130, 83, 99}},
		// The message type first, then the others by code, then the end option.
		{"options", 240, []byte{53, 1, 2, 1, 4, 255, 255, 255, 0, 3, 4, 10, 0, 2, 1, 255}},
	} {
		if got := b[c.off : c.off+len(c.want)]; !bytes.Equal(got, c.want) {
			t.Errorf("%s at %d: % x, want % x", c.what, c.off, got, c.want)
		}
	}
}

func TestParseMessage(t *testing.T) {
	valid, err := discover().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	header := valid[:240]
	withOpts := func(opts ...byte) []byte { return append(append([]byte(nil), header...), opts...) }
	for _, tc := range []struct {
		name     string
		in       []byte
		wantErr  string
		wantOpts map[byte][]byte
	}{
		{name: "too short", in: valid[:239], wantErr: "not a DHCP message"},
		{name: "BOOTP without cookie", in: append(append(append([]byte(nil), valid[:236]...), 0, 0, 0, 0), 255), wantErr: "no magic cookie"},
		{name: "bad hardware length", in: func() []byte { b := withOpts(255); b[2] = 17; return b }(), wantErr: "hardware address length"},
		{name: "option without length", in: withOpts(53), wantErr: "truncated"},
		{name: "option past the end", in: withOpts(53, 4, 1), wantErr: "runs past"},
		{name: "pads and no end option", in: withOpts(0, 0, 53, 1, 3, 0), wantOpts: map[byte][]byte{53: {3}}},
		{name: "nothing after the end option counts", in: withOpts(53, 1, 1, 255, 12, 2, 'x', 'y'), wantOpts: map[byte][]byte{53: {1}}},
		{name: "split option joined", in: withOpts(12, 2, 'v', 'm', 12, 1, '1', 255), wantOpts: map[byte][]byte{12: []byte("vm1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMessage(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Options, tc.wantOpts) {
				t.Errorf("options %v, want %v", m.Options, tc.wantOpts)
			}
			if !bytes.Equal(m.CHAddr, guestMAC) || m.XID != 0x1234abcd {
				t.Errorf("header: chaddr %s xid %#x", m.CHAddr, m.XID)
			}
		})
	}
}

func TestDomainList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		want    []string
		wantErr bool
	}{
		{name: "plain", in: []byte("\x03ns1\x03svc\x00\x03svc\x00"), want: []string{"ns1.svc", "svc"}},
		// RFC 3397's example: the second name points into the first.
		{name: "compressed", in: []byte("\x03eng\x05apple\x03com\x00\x09marketing\xc0\x04"), want: []string{"eng.apple.com", "marketing.apple.com"}},
		{name: "pointer forward", in: []byte("\xc0\x02\x00"), wantErr: true},
		{name: "pointer loop", in: []byte("\x01a\xc0\x00"), wantErr: true},
		{name: "label past the end", in: []byte("\x05ab"), wantErr: true},
		{name: "reserved length bits", in: []byte("\x40"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeDomainList(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("decoded %q, want an error", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	enc, err := EncodeDomainList([]string{"ns1.svc.cluster.local.", "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeDomainList(enc); err != nil || !reflect.DeepEqual(got, []string{"ns1.svc.cluster.local", "cluster.local"}) {
		t.Errorf("round trip: %q, %v", got, err)
	}
	if _, err := EncodeDomainList([]string{"a..b"}); err == nil {
		t.Error("empty label encoded")
	}
}

func TestLeaseReply(t *testing.T) {
	l := testLease()
	request := func(mut func(*Message)) *Message {
		m := discover()
		m.Options[OptMessageType] = []byte{byte(Request)}
		m.SetAddrs(OptRequestedIP, GuestPrefix.Addr())
		m.SetAddrs(OptServerID, GatewayPrefix.Addr())
		if mut != nil {
			mut(m)
		}
		return m
	}
	configured := map[byte][]byte{
		OptSubnetMask:   {255, 255, 255, 0},
		OptRouter:       {10, 0, 2, 1},
		OptServerID:     {10, 0, 2, 1},
		OptDNS:          {10, 96, 0, 10, 10, 96, 0, 11},
		OptHostname:     []byte("vm1"),
		OptDomainName:   []byte("ns1.svc.cluster.local"),
		OptDomainSearch: []byte("\x03ns1\x03svc\x07cluster\x05local\x00\x03svc\x07cluster\x05local\x00"),
		OptInterfaceMTU: {0x05, 0xaa},
		OptLeaseTime:    {0x05, 0x25, 0x0a, 0x80}, // 999 days
	}
	with := func(t MessageType, drop ...byte) map[byte][]byte {
		out := map[byte][]byte{OptMessageType: {byte(t)}}
		for k, v := range configured {
			out[k] = v
		}
		for _, d := range drop {
			delete(out, d)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		req        *Message
		want       map[byte][]byte // nil: no reply
		wantYI     netip.Addr
		wantBcast  bool
		wantCIAddr netip.Addr
	}{
		{name: "discover gets an offer", req: discover(), want: with(Offer), wantYI: GuestPrefix.Addr()},
		{name: "request after the offer gets an ack", req: request(nil), want: with(Ack), wantYI: GuestPrefix.Addr()},
		{name: "renewal names the address in ciaddr", req: request(func(m *Message) {
			delete(m.Options, OptRequestedIP)
			delete(m.Options, OptServerID)
			m.CIAddr = GuestPrefix.Addr()
		}), want: with(Ack), wantYI: GuestPrefix.Addr(), wantCIAddr: GuestPrefix.Addr()},
		{name: "request for another address is refused", req: request(func(m *Message) {
			m.SetAddrs(OptRequestedIP, netip.MustParseAddr("10.0.2.7"))
		}), want: map[byte][]byte{
			OptMessageType: {byte(Nak)}, OptServerID: {10, 0, 2, 1},
			OptMessage: []byte("requested address is not this client's"),
		}, wantBcast: true},
		{name: "request for another server is ignored", req: request(func(m *Message) {
			m.SetAddrs(OptServerID, netip.MustParseAddr("192.0.2.1"))
		})},
		{name: "inform gets parameters without a lease", req: func() *Message {
			m := discover()
			m.Options[OptMessageType] = []byte{byte(Inform)}
			m.CIAddr = GuestPrefix.Addr()
			return m
		}(), want: with(Ack, OptLeaseTime), wantCIAddr: GuestPrefix.Addr()},
		{name: "another client is ignored", req: func() *Message {
			m := discover()
			m.CHAddr = net.HardwareAddr{2, 0, 0, 0, 0, 9}
			return m
		}()},
		{name: "a reply is ignored", req: func() *Message { m := discover(); m.Op = OpReply; return m }()},
		{name: "release is not answered", req: func() *Message {
			m := discover()
			m.Options[OptMessageType] = []byte{byte(Release)}
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.Reply(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("replied %s, want silence", got.Type())
				}
				return
			}
			if got == nil {
				t.Fatal("no reply")
			}
			if !reflect.DeepEqual(got.Options, tc.want) {
				t.Errorf("options\n got %v\nwant %v", got.Options, tc.want)
			}
			if got.Op != OpReply || got.XID != tc.req.XID || !bytes.Equal(got.CHAddr, tc.req.CHAddr) {
				t.Errorf("header op %d xid %#x chaddr %s, want a reply to the request", got.Op, got.XID, got.CHAddr)
			}
			if got.YIAddr != tc.wantYI {
				t.Errorf("yiaddr %s, want %s", got.YIAddr, tc.wantYI)
			}
			if got.CIAddr != tc.wantCIAddr {
				t.Errorf("ciaddr %s, want %s", got.CIAddr, tc.wantCIAddr)
			}
			if bcast := got.Flags&Broadcast != 0; bcast != tc.wantBcast {
				t.Errorf("broadcast flag %v, want %v", bcast, tc.wantBcast)
			}
			if _, err := got.Marshal(); err != nil {
				t.Errorf("reply does not encode: %v", err)
			}
		})
	}
}

func TestLeaseReplyMinimal(t *testing.T) {
	// No DNS, no search list, no host name, no MTU: those options stay out instead of going
	// out empty, and an infinite-looking duration is capped below "infinite".
	l := Lease{ClientMAC: guestMAC, Addr: GuestPrefix, Router: GatewayPrefix.Addr(), ServerID: GatewayPrefix.Addr(), Duration: 1 << 62}
	got, err := l.Reply(discover())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []byte{OptDNS, OptDomainName, OptDomainSearch, OptHostname, OptInterfaceMTU} {
		if _, ok := got.Options[c]; ok {
			t.Errorf("option %d present", c)
		}
	}
	if lt := got.Options[OptLeaseTime]; !bytes.Equal(lt, []byte{0xff, 0xff, 0xff, 0xfe}) {
		t.Errorf("lease time % x, want capped at 0xfffffffe", lt)
	}
	if LeaseTime/time.Second > 0xfffffffe {
		t.Error("LeaseTime does not fit the option")
	}
}

// FuzzParseMessage checks that no input makes the parser panic, and that whatever it accepts
// encodes and parses back to the same message.
func FuzzParseMessage(f *testing.F) {
	for _, m := range []*Message{discover(), {Op: OpReply, HType: 1, CHAddr: guestMAC, Options: map[byte][]byte{OptDomainSearch: bytes.Repeat([]byte{'x'}, 300)}}} {
		b, err := m.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		if err != nil {
			return
		}
		_ = m.Type()
		if v, ok := m.Options[OptDomainSearch]; ok {
			_, _ = DecodeDomainList(v)
		}
		if len(m.SName) > 63 || len(m.File) > 127 {
			// The fields were full without a terminating NUL; Marshal rightly refuses them.
			return
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("parsed message does not encode: %v", err)
		}
		again, err := ParseMessage(out)
		if err != nil {
			t.Fatalf("encoded message does not parse: %v", err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, again)
		}
	})
}
