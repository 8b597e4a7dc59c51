package network

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// NIC is the VMI's interface on the pod network, as the masquerade binding needs it.
type NIC struct {
	// Name is the VMI's interface name (spec.domain.devices.interfaces[].name).
	Name string
	// MAC is the guest's MAC: the VMI's, or one derived from the VMI's UID (see GuestMAC).
	MAC net.HardwareAddr
	// Ports restricts the inbound forwarding to these ports; empty forwards every TCP and UDP port.
	Ports []Port
	// Hostname is what DHCP tells the guest to call itself.
	Hostname string
	// Subdomain and Namespace make the guest's own DNS domain, as KubeVirt adds it to the
	// search list (<subdomain>.<namespace>.svc.<cluster domain>).
	Subdomain, Namespace string
}

// Protocol is a transport protocol the binding forwards.
type Protocol string

const (
	TCP Protocol = "tcp"
	UDP Protocol = "udp"
)

// Port is one forwarded port.
type Port struct {
	Protocol Protocol
	Port     uint16
}

func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

// maxHostname is the longest host name DHCP hands out: a DNS label, as KubeVirt truncates it.
const maxHostname = 63

// PodNIC finds the VMI's interface on the pod network. It returns nil when the VMI has no pod
// network interface, and an error for interfaces this launcher cannot provide: another binding
// than masquerade on the pod network, or a network other than the pod network.
func PodNIC(vmi *kubevirtv1.VirtualMachineInstance) (*NIC, error) {
	networks := map[string]*kubevirtv1.Network{}
	for i := range vmi.Spec.Networks {
		networks[vmi.Spec.Networks[i].Name] = &vmi.Spec.Networks[i]
	}
	var nic *NIC
	for i := range vmi.Spec.Domain.Devices.Interfaces {
		iface := &vmi.Spec.Domain.Devices.Interfaces[i]
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", i)
		n, ok := networks[iface.Name]
		if !ok {
			return nil, fmt.Errorf("%s: no network named %q", field, iface.Name)
		}
		if n.Pod == nil {
			return nil, fmt.Errorf("%s: network %q: only the pod network is supported by this launcher", field, iface.Name)
		}
		if b := binding(iface); b != "masquerade" {
			return nil, fmt.Errorf("%s: binding %s on the pod network is not supported by this launcher (only masquerade)", field, b)
		}
		if nic != nil {
			return nil, fmt.Errorf("%s: a second interface on the pod network", field)
		}
		mac, err := GuestMAC(vmi, iface)
		if err != nil {
			return nil, fmt.Errorf("%s.macAddress: %w", field, err)
		}
		ports, err := ports(iface.Ports)
		if err != nil {
			return nil, fmt.Errorf("%s.%w", field, err)
		}
		nic = &NIC{
			Name:      iface.Name,
			MAC:       mac,
			Ports:     ports,
			Hostname:  hostname(vmi),
			Subdomain: vmi.Spec.Subdomain,
			Namespace: vmi.Namespace,
		}
	}
	return nic, nil
}

func binding(iface *kubevirtv1.Interface) string {
	switch {
	case iface.Masquerade != nil:
		return "masquerade"
	case iface.Bridge != nil:
		return "bridge"
	case iface.SRIOV != nil:
		return "sriov"
	case iface.DeprecatedSlirp != nil:
		return "slirp"
	case iface.DeprecatedPasst != nil:
		return "passt"
	case iface.DeprecatedMacvtap != nil:
		return "macvtap"
	case iface.Binding != nil:
		return "plugin " + iface.Binding.Name
	}
	// The webhook defaults the pod network to masquerade; a VMI that skipped it gets the same.
	return "masquerade"
}

func ports(in []kubevirtv1.Port) ([]Port, error) {
	var out []Port
	for i, p := range in {
		proto := Protocol(strings.ToLower(p.Protocol))
		if proto == "" {
			proto = TCP
		}
		if proto != TCP && proto != UDP {
			return nil, fmt.Errorf("ports[%d].protocol: %q is not TCP or UDP", i, p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return nil, fmt.Errorf("ports[%d].port: %d is not a port number", i, p.Port)
		}
		out = append(out, Port{Protocol: proto, Port: uint16(p.Port)})
	}
	return out, nil
}

// hostname is the VMI's host name as KubeVirt hands it out: spec.hostname, else the VMI's name,
// cut to one DNS label.
func hostname(vmi *kubevirtv1.VirtualMachineInstance) string {
	h := vmi.Spec.Hostname
	if h == "" {
		h = vmi.Name
	}
	if len(h) > maxHostname {
		h = h[:maxHostname]
	}
	return h
}

// macNamespace seeds the derived MACs, so that they do not collide with other hashes of the UID.
const macNamespace = "d8v-guest-mac/"

// GuestMAC is the interface's MAC address: the one the VMI sets, else one derived from the VMI's
// UID and the interface name. KubeVirt lets libvirt pick a random one; a derived one is the same
// in the domain, the DHCP server and the status from the start, and across launcher restarts.
func GuestMAC(vmi *kubevirtv1.VirtualMachineInstance, iface *kubevirtv1.Interface) (net.HardwareAddr, error) {
	if iface.MacAddress != "" {
		// KubeVirt accepts dashes as well as colons.
		mac, err := net.ParseMAC(strings.ReplaceAll(iface.MacAddress, "-", ":"))
		if err != nil {
			return nil, fmt.Errorf("parse MAC: %w", err)
		}
		if len(mac) != 6 {
			return nil, fmt.Errorf("%q is not a 48-bit MAC", iface.MacAddress)
		}
		if mac[0]&1 != 0 {
			return nil, fmt.Errorf("%q is a multicast MAC", iface.MacAddress)
		}
		return mac, nil
	}
	if vmi.UID == "" {
		return nil, errors.New("no MAC set and no VMI UID to derive one from")
	}
	sum := sha256.Sum256([]byte(macNamespace + string(vmi.UID) + "/" + iface.Name))
	mac := net.HardwareAddr(sum[:6])
	// Locally administered (bit 1) unicast (bit 0 clear): never a vendor's address.
	mac[0] = mac[0]&^0x01 | 0x02
	return mac, nil
}

// DNSConfig is what the guest gets from the Pod's resolver configuration.
type DNSConfig struct {
	Servers []netip.Addr
	Search  []string
}

// ReadResolvConf reads the name servers and the search list of a resolv.conf.
func ReadResolvConf(path string) (DNSConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return DNSConfig{}, fmt.Errorf("read resolver configuration: %w", err)
	}
	defer f.Close()
	return parseResolvConf(f)
}

// parseResolvConf keeps the IPv4 name servers the guest can reach: a loopback resolver of the
// Pod (or of the node) is not reachable from behind the NAT. As in the resolver, the last search
// or domain line wins.
func parseResolvConf(r io.Reader) (DNSConfig, error) {
	var c DNSConfig
	s := bufio.NewScanner(r)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			a, err := netip.ParseAddr(f[1])
			if err != nil || !a.Is4() || a.IsLoopback() {
				continue
			}
			c.Servers = append(c.Servers, a)
		case "search":
			c.Search = append([]string(nil), f[1:]...)
		case "domain":
			c.Search = []string{f[1]}
		}
	}
	if err := s.Err(); err != nil {
		return DNSConfig{}, fmt.Errorf("read resolver configuration: %w", err)
	}
	return c, nil
}

// searchDomains puts the guest's own domain first when it has a subdomain, as KubeVirt does: the
// cluster domain is whatever follows "<namespace>.svc." in the Pod's search list.
func searchDomains(nic *NIC, search []string) []string {
	if nic.Subdomain == "" || nic.Namespace == "" {
		return search
	}
	prefix := nic.Namespace + ".svc."
	for _, s := range search {
		if cluster, ok := strings.CutPrefix(s, prefix); ok && cluster != "" {
			return append([]string{nic.Subdomain + "." + s}, search...)
		}
	}
	return search
}
