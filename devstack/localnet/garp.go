package localnet

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// An address handed out again belongs to a new veth with a new MAC, while every namespace that
// talked to its former holder keeps that holder's MAC in its neighbour table (REACHABLE or STALE):
// its first packets go to a MAC nobody has, and dials time out until the entry fails after
// seconds. A gratuitous ARP from the new holder makes every neighbour on the bridge that knows the
// address take the new MAC at once (Linux overrides an existing entry with a gratuitous ARP even
// without arp_accept); an address nobody knows creates no entry anywhere.

// Ethernet and ARP constants of the announcement (RFC 826, RFC 5227 section 3).
const (
	etherTypeARP  = 0x0806
	etherTypeIPv4 = 0x0800
	arpRequest    = 1
	// garpFrameLen is the Ethernet header (14) and the ARP payload for IPv4 over Ethernet (28).
	garpFrameLen = 42
)

// bridgePortForwarding is the value of /sys/class/net/<port>/brport/state once the bridge forwards
// through the port (BR_STATE_FORWARDING).
const bridgePortForwarding = "3"

// garpFrame is a broadcast ARP announcement of ip at mac: an ARP request whose sender and target
// address are both ip, as arping -U sends it.
func garpFrame(mac net.HardwareAddr, ip netip.Addr) ([]byte, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("gratuitous ARP: MAC %q is not 6 bytes", mac)
	}
	if !ip.Is4() {
		return nil, fmt.Errorf("gratuitous ARP: %s is not an IPv4 address", ip)
	}
	a := ip.As4()
	f := make([]byte, 0, garpFrameLen)
	f = append(f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // destination: broadcast
	f = append(f, mac...)
	f = binary.BigEndian.AppendUint16(f, etherTypeARP)
	f = binary.BigEndian.AppendUint16(f, 1) // hardware type: Ethernet
	f = binary.BigEndian.AppendUint16(f, etherTypeIPv4)
	f = append(f, 6, 4) // hardware and protocol address lengths
	f = binary.BigEndian.AppendUint16(f, arpRequest)
	f = append(f, mac...)
	f = append(f, a[:]...)
	f = append(f, 0, 0, 0, 0, 0, 0) // target hardware address: unknown
	f = append(f, a[:]...)
	return f, nil
}

// announce sends a gratuitous ARP for h's address out of h's eth0, once the bridge forwards
// through h's port: a frame sent before that would be dropped at the bridge.
func (n Net) announce(h Host) error {
	outer, _ := vethNames(h.Name)
	if err := waitForwarding(outer, 5*time.Second); err != nil {
		return err
	}
	return h.Do(func() error {
		eth0, err := net.InterfaceByName("eth0")
		if err != nil {
			return fmt.Errorf("gratuitous ARP: %w", err)
		}
		frame, err := garpFrame(eth0.HardwareAddr, h.IP)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(etherTypeARP)))
		if err != nil {
			return fmt.Errorf("gratuitous ARP: packet socket: %w", err)
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Protocol: htons(etherTypeARP), Ifindex: eth0.Index, Halen: 6}
		copy(to.Addr[:], frame[:6])
		if err := unix.Sendto(fd, frame, 0, to); err != nil {
			return fmt.Errorf("gratuitous ARP for %s on %s: %w", h.IP, h.NetNS, err)
		}
		return nil
	})
}

// waitForwarding waits until the bridge forwards through port: its carrier comes up with the
// peer end, and the bridge learns of that asynchronously.
func waitForwarding(port string, timeout time.Duration) error {
	path := filepath.Join("/sys/class/net", port, "brport", "state")
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(b)) == bridgePortForwarding {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bridge port %s does not forward after %s (state %q, %v)", port, timeout, strings.TrimSpace(string(b)), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
