// Package servicetable decides what the local stack's Services are, as a service proxy and a
// cluster DNS server need them: from Services and EndpointSlices, each Service's cluster IP, its
// ports with the ready endpoints behind each, and the addresses a headless Service's name stands
// for. It is a pure function of the objects; the proxy and the DNS server apply its result.
package servicetable

import (
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Port is one port of a Service with the endpoints that serve it.
type Port struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
	// NodePort is the port every node serves it at too (a NodePort Service's), 0 for none.
	NodePort int32
	// Backends are the ready endpoints' addresses with the port's target port, sorted.
	Backends []netip.AddrPort
}

// Endpoint is one ready endpoint address of a Service, as DNS names it.
type Endpoint struct {
	IP netip.Addr
	// Hostname is the endpoint's hostname (a pod's spec.hostname under a matching subdomain),
	// or empty.
	Hostname string
}

// Service is one Service as the proxy and DNS see it.
type Service struct {
	types.NamespacedName
	// ClusterIP is invalid for a headless Service and an ExternalName one.
	ClusterIP    netip.Addr
	ExternalName string
	Ports        []Port
	// Endpoints are the ready endpoint addresses of all its slices, sorted by IP, without
	// duplicates.
	Endpoints []Endpoint
}

// Headless tells a Service whose name stands for its endpoints rather than a cluster IP.
func (s Service) Headless() bool { return !s.ClusterIP.IsValid() && s.ExternalName == "" }

// Table is every Service by namespace and name.
type Table map[Key]Service

// Key names a Service.
type Key = types.NamespacedName

// Build computes the table. Only IPv4 is served; an endpoint counts when its ready condition is
// unset or true (EndpointSlice semantics), and a slice belongs to the Service its
// kubernetes.io/service-name label names. A Service port is matched to a slice port by name, as
// the EndpointSlice controller names them (a named targetPort is resolved there, per pod).
func Build(svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice) Table {
	bySvc := map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for _, es := range eps {
		name := es.Labels[discoveryv1.LabelServiceName]
		if name == "" || es.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		key := types.NamespacedName{Namespace: es.Namespace, Name: name}
		bySvc[key] = append(bySvc[key], es)
	}
	t := Table{}
	for _, svc := range svcs {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		s := Service{NamespacedName: key}
		switch {
		case svc.Spec.Type == corev1.ServiceTypeExternalName:
			s.ExternalName = svc.Spec.ExternalName
		case svc.Spec.ClusterIP != corev1.ClusterIPNone:
			ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
			if err != nil || !ip.Is4() {
				continue // not allocated yet, or IPv6
			}
			s.ClusterIP = ip
		}
		s.Endpoints = readyEndpoints(bySvc[key])
		for _, sp := range svc.Spec.Ports {
			proto := sp.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			s.Ports = append(s.Ports, Port{Name: sp.Name, Protocol: proto, Port: sp.Port, NodePort: sp.NodePort, Backends: backends(bySvc[key], sp.Name, proto)})
		}
		t[key] = s
	}
	return t
}

func ready(ep discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

func readyEndpoints(eps []*discoveryv1.EndpointSlice) []Endpoint {
	seen := map[netip.Addr]bool{}
	var out []Endpoint
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			if !ready(ep) {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || seen[ip] {
					continue
				}
				seen[ip] = true
				e := Endpoint{IP: ip}
				if ep.Hostname != nil {
					e.Hostname = *ep.Hostname
				}
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out
}

func backends(eps []*discoveryv1.EndpointSlice, portName string, proto corev1.Protocol) []netip.AddrPort {
	var out []netip.AddrPort
	for _, es := range eps {
		for _, p := range es.Ports {
			name, pproto := "", corev1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				pproto = *p.Protocol
			}
			if name != portName || pproto != proto || p.Port == nil {
				continue
			}
			for _, ep := range es.Endpoints {
				if !ready(ep) {
					continue
				}
				for _, a := range ep.Addresses {
					if ip, err := netip.ParseAddr(a); err == nil {
						out = append(out, netip.AddrPortFrom(ip, uint16(*p.Port)))
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out)
}
