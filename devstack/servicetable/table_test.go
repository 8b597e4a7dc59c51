package servicetable

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func svc(name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func slice(svcName string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svcName + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps,
	}
}

func ep(ip string, ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func key(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }

func TestBuild(t *testing.T) {
	http := corev1.ServicePort{Name: "http", Port: 80}
	for _, c := range []struct {
		name   string
		svcs   []*corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   Table
	}{{
		name: "ready endpoints only, by port name",
		svcs: []*corev1.Service{svc("web", "10.96.0.20", http, corev1.ServicePort{Name: "admin", Port: 81})},
		slices: []*discoveryv1.EndpointSlice{slice("web",
			[]discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, {Name: ptr.To("admin"), Port: ptr.To[int32](9090)}},
			ep("10.213.0.7", nil), ep("10.213.0.5", ptr.To(true)), ep("10.213.0.6", ptr.To(false)))},
		want: Table{key("web"): {NamespacedName: key("web"), ClusterIP: netip.MustParseAddr("10.96.0.20"),
			Ports: []Port{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, Backends: []netip.AddrPort{netip.MustParseAddrPort("10.213.0.5:8080"), netip.MustParseAddrPort("10.213.0.7:8080")}},
				{Name: "admin", Protocol: corev1.ProtocolTCP, Port: 81, Backends: []netip.AddrPort{netip.MustParseAddrPort("10.213.0.5:9090"), netip.MustParseAddrPort("10.213.0.7:9090")}},
			},
			Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.213.0.5")}, {IP: netip.MustParseAddr("10.213.0.7")}}}},
	}, {
		name: "no slices: no backends",
		svcs: []*corev1.Service{svc("web", "10.96.0.20", http)},
		want: Table{key("web"): {NamespacedName: key("web"), ClusterIP: netip.MustParseAddr("10.96.0.20"),
			Ports: []Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}},
	}, {
		name: "a node port",
		svcs: []*corev1.Service{svc("web", "10.96.0.20", corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})},
		want: Table{key("web"): {NamespacedName: key("web"), ClusterIP: netip.MustParseAddr("10.96.0.20"),
			Ports: []Port{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}},
	}, {
		name: "headless with hostnames; a slice of another service is ignored",
		svcs: []*corev1.Service{svc("db", corev1.ClusterIPNone)},
		slices: []*discoveryv1.EndpointSlice{
			slice("db", nil, discoveryv1.Endpoint{Addresses: []string{"10.213.0.9"}, Hostname: ptr.To("db-0")}, ep("10.213.0.8", nil)),
			slice("other", nil, ep("10.213.0.3", nil)),
		},
		want: Table{key("db"): {NamespacedName: key("db"),
			Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.213.0.8")}, {IP: netip.MustParseAddr("10.213.0.9"), Hostname: "db-0"}}}},
	}, {
		name: "external name; an unallocated cluster IP is skipped",
		svcs: []*corev1.Service{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.org"}},
			svc("new", ""),
		},
		want: Table{key("ext"): {NamespacedName: key("ext"), ExternalName: "example.org"}},
	}, {
		name: "UDP port matches the UDP slice port only",
		svcs: []*corev1.Service{svc("dns", "10.96.0.30", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})},
		slices: []*discoveryv1.EndpointSlice{slice("dns",
			[]discoveryv1.EndpointPort{{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)}, {Name: ptr.To("dns"), Port: ptr.To[int32](5454)}},
			ep("10.213.0.4", nil))},
		want: Table{key("dns"): {NamespacedName: key("dns"), ClusterIP: netip.MustParseAddr("10.96.0.30"),
			Ports:     []Port{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, Backends: []netip.AddrPort{netip.MustParseAddrPort("10.213.0.4:5353")}}},
			Endpoints: []Endpoint{{IP: netip.MustParseAddr("10.213.0.4")}}}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			if got := Build(c.svcs, c.slices); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Build:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
