package nodeagent

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodDNS(t *testing.T) {
	node, err := ParseResolvConf(strings.NewReader("# host\nnameserver 10.255.255.53\nsearch corp.example\noptions edns0\n"))
	if err != nil {
		t.Fatal(err)
	}
	cluster := []string{"10.121.40.10"}
	for _, c := range []struct {
		name       string
		spec       corev1.PodSpec
		clusterDNS []string
		want       string
	}{{
		name: "ClusterFirst by default", clusterDNS: cluster,
		want: "nameserver 10.121.40.10\nsearch ns.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n",
	}, {
		name: "ClusterFirst on hostNetwork is Default", clusterDNS: cluster,
		spec: corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirst},
		want: "nameserver 10.255.255.53\nsearch corp.example\noptions edns0\n",
	}, {
		name: "ClusterFirstWithHostNet", clusterDNS: cluster,
		spec: corev1.PodSpec{HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet},
		want: "nameserver 10.121.40.10\nsearch ns.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n",
	}, {
		name: "ClusterFirst without cluster DNS is Default",
		want: "nameserver 10.255.255.53\nsearch corp.example\noptions edns0\n",
	}, {
		name: "Default", clusterDNS: cluster, spec: corev1.PodSpec{DNSPolicy: corev1.DNSDefault},
		want: "nameserver 10.255.255.53\nsearch corp.example\noptions edns0\n",
	}, {
		name: "None with dnsConfig", clusterDNS: cluster,
		spec: corev1.PodSpec{DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.1"}, Searches: []string{"a.example", "a.example."},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "rotate"}}}},
		want: "nameserver 192.0.2.1\nsearch a.example\noptions ndots:2 rotate\n",
	}, {
		name: "ClusterFirst with dnsConfig: appended, options merged", clusterDNS: cluster,
		spec: corev1.PodSpec{DNSConfig: &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}, Searches: []string{"svc.cluster.local", "b.example"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}}}},
		want: "nameserver 10.121.40.10\nnameserver 192.0.2.1\nnameserver 192.0.2.2\n" +
			"search ns.svc.cluster.local svc.cluster.local cluster.local corp.example b.example\noptions ndots:1\n",
	}} {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: c.spec}
			if got := PodDNS(pod, c.clusterDNS, "cluster.local", node).String(); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
