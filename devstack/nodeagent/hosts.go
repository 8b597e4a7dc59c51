package nodeagent

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// etcHosts is the pod's /etc/hosts, as kubelet writes it: localhost, the pod's own names and its
// hostAliases.
func etcHosts(pod *corev1.Pod, ip string) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (d8v node agent).\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	if ip != "" {
		names := []string{podHostname(pod)}
		if pod.Spec.Subdomain != "" {
			names = []string{fmt.Sprintf("%s.%s.%s.svc.cluster.local", podHostname(pod), pod.Spec.Subdomain, pod.Namespace), podHostname(pod)}
		}
		fmt.Fprintf(&b, "%s\t%s\n", ip, strings.Join(names, "\t"))
	}
	for _, a := range pod.Spec.HostAliases {
		fmt.Fprintf(&b, "\n# Entries added by HostAliases.\n%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.String()
}

// podHostname is the pod's hostname: spec.hostname, or its name cut to a DNS label.
func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}
