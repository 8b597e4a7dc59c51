package network

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
)

// DHCPv4 (RFC 2131) messages: the fixed BOOTP header, the magic cookie and the options (RFC 2132).

// Op codes of the BOOTP header.
const (
	OpRequest = 1
	OpReply   = 2
)

// MessageType is option 53.
type MessageType byte

const (
	Discover MessageType = 1
	Offer    MessageType = 2
	Request  MessageType = 3
	Decline  MessageType = 4
	Ack      MessageType = 5
	Nak      MessageType = 6
	Release  MessageType = 7
	Inform   MessageType = 8
)

var messageTypeNames = map[MessageType]string{
	Discover: "DISCOVER", Offer: "OFFER", Request: "REQUEST", Decline: "DECLINE",
	Ack: "ACK", Nak: "NAK", Release: "RELEASE", Inform: "INFORM",
}

func (t MessageType) String() string {
	if s, ok := messageTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type-%d", byte(t))
}

// Option codes the server reads or writes.
const (
	OptPad             = 0
	OptSubnetMask      = 1
	OptRouter          = 3
	OptDNS             = 6
	OptHostname        = 12
	OptDomainName      = 15
	OptInterfaceMTU    = 26
	OptRequestedIP     = 50
	OptLeaseTime       = 51
	OptOverload        = 52
	OptMessageType     = 53
	OptServerID        = 54
	OptParamRequest    = 55
	OptMessage         = 56
	OptMaxMessageSize  = 57
	OptClientID        = 61
	OptDomainSearch    = 119
	OptEnd             = 255
	headerLen          = 236
	minMessageLen      = 300 // BOOTP's minimum; some clients drop shorter replies
	maxHardwareAddrLen = 16
)

var magicCookie = []byte{99, 130, 83, 99}

// Broadcast is the BOOTP flag asking for broadcast replies.
const Broadcast = 0x8000

// Message is a DHCPv4 message. Options hold the raw value of each option; an option that came in
// several pieces (RFC 3396) is joined. Option overload (sname and file carrying options) is not
// interpreted: this server never needs the fields, and clients do not use overload.
type Message struct {
	Op, HType, Hops byte
	XID             uint32
	Secs, Flags     uint16
	CIAddr          netip.Addr
	YIAddr          netip.Addr
	SIAddr          netip.Addr
	GIAddr          netip.Addr
	CHAddr          net.HardwareAddr
	SName, File     string
	Options         map[byte][]byte
}

// ErrNotDHCP is a BOOTP message without the DHCP magic cookie, or something else entirely.
var ErrNotDHCP = errors.New("not a DHCP message")

// ParseMessage decodes a DHCPv4 message.
func ParseMessage(b []byte) (*Message, error) {
	if len(b) < headerLen+len(magicCookie) {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrNotDHCP, len(b), headerLen+len(magicCookie))
	}
	if !bytes.Equal(b[headerLen:headerLen+4], magicCookie) {
		return nil, fmt.Errorf("%w: no magic cookie", ErrNotDHCP)
	}
	hlen := int(b[2])
	if hlen > maxHardwareAddrLen {
		return nil, fmt.Errorf("hardware address length %d exceeds %d", hlen, maxHardwareAddrLen)
	}
	m := &Message{
		Op:     b[0],
		HType:  b[1],
		Hops:   b[3],
		XID:    binary.BigEndian.Uint32(b[4:8]),
		Secs:   binary.BigEndian.Uint16(b[8:10]),
		Flags:  binary.BigEndian.Uint16(b[10:12]),
		CIAddr: netip.AddrFrom4([4]byte(b[12:16])),
		YIAddr: netip.AddrFrom4([4]byte(b[16:20])),
		SIAddr: netip.AddrFrom4([4]byte(b[20:24])),
		GIAddr: netip.AddrFrom4([4]byte(b[24:28])),
		// A copy: the caller reuses its read buffer.
		CHAddr:  append(net.HardwareAddr(nil), b[28:28+hlen]...),
		SName:   cString(b[44:108]),
		File:    cString(b[108:236]),
		Options: map[byte][]byte{},
	}
	opts := b[headerLen+4:]
	for i := 0; i < len(opts); {
		code := opts[i]
		i++
		switch code {
		case OptPad:
			continue
		case OptEnd:
			return m, nil
		}
		if i >= len(opts) {
			return nil, fmt.Errorf("option %d: truncated before its length", code)
		}
		n := int(opts[i])
		i++
		if i+n > len(opts) {
			return nil, fmt.Errorf("option %d: length %d runs past the message end", code, n)
		}
		v := m.Options[code]
		if v == nil {
			// Present but empty stays distinguishable from absent.
			v = []byte{}
		}
		m.Options[code] = append(v, opts[i:i+n]...)
		i += n
	}
	// No end option: accepted, as most servers do, since everything before was well formed.
	return m, nil
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Marshal encodes the message, options in code order with the message type first (where clients
// and packet dumps expect it), padded to BOOTP's minimum size.
func (m *Message) Marshal() ([]byte, error) {
	if len(m.CHAddr) > maxHardwareAddrLen {
		return nil, fmt.Errorf("hardware address of %d bytes exceeds %d", len(m.CHAddr), maxHardwareAddrLen)
	}
	if len(m.SName) > 63 || len(m.File) > 127 {
		return nil, errors.New("sname or file too long")
	}
	b := make([]byte, headerLen, minMessageLen)
	b[0], b[1], b[2], b[3] = m.Op, m.HType, byte(len(m.CHAddr)), m.Hops
	binary.BigEndian.PutUint32(b[4:8], m.XID)
	binary.BigEndian.PutUint16(b[8:10], m.Secs)
	binary.BigEndian.PutUint16(b[10:12], m.Flags)
	for i, a := range []netip.Addr{m.CIAddr, m.YIAddr, m.SIAddr, m.GIAddr} {
		if !a.IsValid() {
			continue
		}
		if !a.Is4() {
			return nil, fmt.Errorf("address %s is not IPv4", a)
		}
		v := a.As4()
		copy(b[12+4*i:], v[:])
	}
	copy(b[28:44], m.CHAddr)
	copy(b[44:108], m.SName)
	copy(b[108:236], m.File)
	b = append(b, magicCookie...)

	codes := make([]int, 0, len(m.Options))
	for c := range m.Options {
		if c == OptPad || c == OptEnd {
			return nil, fmt.Errorf("option %d cannot carry a value", c)
		}
		if c != OptMessageType {
			codes = append(codes, int(c))
		}
	}
	sort.Ints(codes)
	if _, ok := m.Options[OptMessageType]; ok {
		codes = append([]int{OptMessageType}, codes...)
	}
	for _, c := range codes {
		v := m.Options[byte(c)]
		// RFC 3396: a value over 255 bytes goes out as consecutive pieces of the same option.
		for first := true; first || len(v) > 0; first = false {
			n := min(len(v), 255)
			b = append(b, byte(c), byte(n))
			b = append(b, v[:n]...)
			v = v[n:]
		}
	}
	b = append(b, OptEnd)
	for len(b) < minMessageLen {
		b = append(b, OptPad)
	}
	return b, nil
}

// Type is the message type, 0 when the option is missing or malformed.
func (m *Message) Type() MessageType {
	if v := m.Options[OptMessageType]; len(v) == 1 {
		return MessageType(v[0])
	}
	return 0
}

// Addr reads an option holding one IPv4 address.
func (m *Message) Addr(code byte) (netip.Addr, bool) {
	v := m.Options[code]
	if len(v) != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(v)), true
}

// SetAddrs sets an option to a list of IPv4 addresses.
func (m *Message) SetAddrs(code byte, addrs ...netip.Addr) {
	v := make([]byte, 0, 4*len(addrs))
	for _, a := range addrs {
		a4 := a.As4()
		v = append(v, a4[:]...)
	}
	m.Options[code] = v
}

// SetUint32 sets an option to a 32-bit number (lease times).
func (m *Message) SetUint32(code byte, n uint32) {
	m.Options[code] = binary.BigEndian.AppendUint32(nil, n)
}

// SetUint16 sets an option to a 16-bit number (MTU).
func (m *Message) SetUint16(code byte, n uint16) {
	m.Options[code] = binary.BigEndian.AppendUint16(nil, n)
}

// EncodeDomainList encodes option 119 (RFC 3397): each name as DNS labels. Compression is
// optional for the sender, and the lists here are short.
func EncodeDomainList(domains []string) ([]byte, error) {
	var b []byte
	for _, d := range domains {
		d = strings.TrimSuffix(d, ".")
		if d == "" {
			continue
		}
		for _, label := range strings.Split(d, ".") {
			if label == "" || len(label) > 63 {
				return nil, fmt.Errorf("domain %q: bad label %q", d, label)
			}
			b = append(b, byte(len(label)))
			b = append(b, label...)
		}
		b = append(b, 0)
	}
	return b, nil
}

// DecodeDomainList reads option 119, following compression pointers within the option.
func DecodeDomainList(b []byte) ([]string, error) {
	var out []string
	for i := 0; i < len(b); {
		name, next, err := readName(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, name)
		i = next
	}
	return out, nil
}

// readName reads the name at off and returns where the next one starts.
func readName(b []byte, off int) (string, int, error) {
	var labels []string
	next := -1
	// Each pointer must go backwards, so a loop cannot run forever; the count is a second guard.
	for jumps := 0; ; {
		if off >= len(b) {
			return "", 0, errors.New("domain list: name runs past the end")
		}
		n := int(b[off])
		switch {
		case n == 0:
			if next < 0 {
				next = off + 1
			}
			return strings.Join(labels, "."), next, nil
		case n&0xc0 == 0xc0:
			if off+1 >= len(b) {
				return "", 0, errors.New("domain list: truncated pointer")
			}
			ptr := (n&0x3f)<<8 | int(b[off+1])
			if ptr >= off || jumps > len(b) {
				return "", 0, errors.New("domain list: pointer does not point backwards")
			}
			if next < 0 {
				next = off + 2
			}
			off = ptr
			jumps++
		case n&0xc0 != 0:
			return "", 0, fmt.Errorf("domain list: bad label length byte %#x", n)
		default:
			if off+1+n > len(b) {
				return "", 0, errors.New("domain list: label runs past the end")
			}
			labels = append(labels, string(b[off+1:off+1+n]))
			off += 1 + n
		}
	}
}
