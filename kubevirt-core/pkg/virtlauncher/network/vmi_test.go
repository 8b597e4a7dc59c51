package network

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func podVMI(mut func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: types.UID("6f0c1b5e-2a4d-4f7e-9a52-2a0b5d0f4c11")},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Interfaces: []kubevirtv1.Interface{{
				Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
			}}}},
			Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
		},
	}
	if mut != nil {
		mut(vmi)
	}
	return vmi
}

func TestPodNIC(t *testing.T) {
	derived, err := GuestMAC(podVMI(nil), &kubevirtv1.Interface{Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		mut     func(*kubevirtv1.VirtualMachineInstance)
		want    *NIC
		wantErr string
	}{
		{name: "defaulted VMI", want: &NIC{Name: "default", MAC: derived, Hostname: "vm1", Namespace: "ns1"}},
		{name: "no interfaces", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces = nil
			v.Spec.Networks = nil
		}},
		{name: "MAC, ports, hostname and subdomain from the VMI", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			i := &v.Spec.Domain.Devices.Interfaces[0]
			i.MacAddress = "02-00-00-00-00-2a"
			i.Ports = []kubevirtv1.Port{{Name: "http", Port: 80}, {Protocol: "UDP", Port: 53}, {Protocol: "tcp", Port: 443}}
			v.Spec.Hostname = "web"
			v.Spec.Subdomain = "sub"
		}, want: &NIC{
			Name: "default", MAC: []byte{2, 0, 0, 0, 0, 0x2a}, Hostname: "web", Subdomain: "sub", Namespace: "ns1",
			Ports: []Port{{TCP, 80}, {UDP, 53}, {TCP, 443}},
		}},
		{name: "long names are cut to a DNS label", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Name = strings.Repeat("x", 70)
		}, want: &NIC{Name: "default", MAC: derived, Hostname: strings.Repeat("x", 63), Namespace: "ns1"}},
		{name: "bridge binding", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}
		}, wantErr: "binding bridge on the pod network is not supported"},
		{name: "multus network", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Networks[0].NetworkSource = kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "x"}}
		}, wantErr: "only the pod network is supported"},
		{name: "interface without network", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Networks = nil
		}, wantErr: `interfaces[0]: no network named "default"`},
		{name: "SCTP port", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].Ports = []kubevirtv1.Port{{Protocol: "SCTP", Port: 9}}
		}, wantErr: `interfaces[0].ports[0].protocol: "SCTP" is not TCP or UDP`},
		{name: "port out of range", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].Ports = []kubevirtv1.Port{{Port: 70000}}
		}, wantErr: "ports[0].port: 70000"},
		{name: "multicast MAC", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].MacAddress = "01:00:5e:00:00:01"
		}, wantErr: "multicast"},
		{name: "bad MAC", mut: func(v *kubevirtv1.VirtualMachineInstance) {
			v.Spec.Domain.Devices.Interfaces[0].MacAddress = "nope"
		}, wantErr: "interfaces[0].macAddress: parse MAC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodNIC(podVMI(tc.mut))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGuestMAC(t *testing.T) {
	vmi := podVMI(nil)
	iface := &vmi.Spec.Domain.Devices.Interfaces[0]
	a, err := GuestMAC(vmi, iface)
	if err != nil {
		t.Fatal(err)
	}
	// Pinned: a changed derivation would give a restarted launcher's guest another address.
	if a.String() != "ae:91:81:89:c5:67" {
		t.Errorf("derived MAC %s changed", a)
	}
	if a[0]&0x02 == 0 || a[0]&0x01 != 0 {
		t.Errorf("derived MAC %s is not a locally administered unicast address", a)
	}
	again, _ := GuestMAC(podVMI(nil), iface)
	if again.String() != a.String() {
		t.Errorf("derivation not stable: %s, then %s", a, again)
	}
	other := podVMI(func(v *kubevirtv1.VirtualMachineInstance) { v.UID = "another" })
	if b, _ := GuestMAC(other, iface); b.String() == a.String() {
		t.Errorf("two VMIs got the same MAC %s", a)
	}
	if b, _ := GuestMAC(vmi, &kubevirtv1.Interface{Name: "second"}); b.String() == a.String() {
		t.Errorf("two interfaces got the same MAC %s", a)
	}
	if _, err := GuestMAC(podVMI(func(v *kubevirtv1.VirtualMachineInstance) { v.UID = "" }), iface); err == nil {
		t.Error("derived a MAC without a UID")
	}
}

func TestResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     DNSConfig
	}{
		{name: "cluster", in: "nameserver 10.96.0.10\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
			want: DNSConfig{Servers: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Search: []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}}},
		{name: "loopback, IPv6 and junk are dropped; the last search line wins",
			in:   "# comment\nnameserver 127.0.0.53\nnameserver ::1\nnameserver fd00::10\nnameserver bogus\nnameserver 192.0.2.53\nsearch a.example\ndomain b.example\n",
			want: DNSConfig{Servers: []netip.Addr{netip.MustParseAddr("192.0.2.53")}, Search: []string{"b.example"}}},
		{name: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseResolvConf(strings.NewReader(tc.in))
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestSearchDomains(t *testing.T) {
	search := []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	for _, tc := range []struct {
		name string
		nic  NIC
		want []string
	}{
		{name: "no subdomain", nic: NIC{Namespace: "ns1"}, want: search},
		{name: "subdomain first", nic: NIC{Namespace: "ns1", Subdomain: "sub"}, want: append([]string{"sub.ns1.svc.cluster.local"}, search...)},
		{name: "no namespace domain in the Pod's list", nic: NIC{Namespace: "other", Subdomain: "sub"}, want: search},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := searchDomains(&tc.nic, search); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
