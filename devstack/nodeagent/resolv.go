package nodeagent

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// DNSConf is the content of a resolv.conf: nameservers, search domains and options.
type DNSConf struct {
	Nameservers []string
	Searches    []string
	Options     []string
}

// ParseResolvConf reads a resolv.conf (the node's, kubelet's --resolv-conf).
func ParseResolvConf(r io.Reader) (DNSConf, error) {
	var c DNSConf
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			c.Nameservers = append(c.Nameservers, f[1:]...)
		case "search", "domain":
			c.Searches = f[1:] // the last one wins, as for the resolver
		case "options":
			c.Options = append(c.Options, f[1:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return DNSConf{}, fmt.Errorf("read resolv.conf: %w", err)
	}
	return c, nil
}

// Kubelet's limits on what it writes.
const (
	maxNameservers = 3
	maxSearches    = 32
)

// PodDNS is the resolv.conf of a pod as kubelet makes it: ClusterFirst (the default) points at
// clusterDNS with the search path <ns>.svc.<domain> svc.<domain> <domain> and the node's search
// domains, and ndots:5; a hostNetwork pod, or a node without cluster DNS, falls back to Default
// unless the policy is ClusterFirstWithHostNet; Default is the node's resolv.conf; None starts
// empty. The pod's dnsConfig is added last: nameservers and searches appended (duplicates
// dropped), options merged by name with the pod's value winning.
func PodDNS(pod *corev1.Pod, clusterDNS []string, domain string, node DNSConf) DNSConf {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirstWithHostNet {
		policy = corev1.DNSClusterFirst
	} else if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if policy == corev1.DNSClusterFirst && len(clusterDNS) == 0 {
		policy = corev1.DNSDefault
	}
	var c DNSConf
	switch policy {
	case corev1.DNSClusterFirst:
		c.Nameservers = slices.Clone(clusterDNS)
		c.Searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, node.Searches...)
		c.Options = []string{"ndots:5"}
	case corev1.DNSDefault:
		c = DNSConf{Nameservers: slices.Clone(node.Nameservers), Searches: slices.Clone(node.Searches), Options: slices.Clone(node.Options)}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		c.Nameservers = append(c.Nameservers, dc.Nameservers...)
		c.Searches = append(c.Searches, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			c.Options = slices.DeleteFunc(c.Options, func(have string) bool {
				name, _, _ := strings.Cut(have, ":")
				return name == o.Name
			})
			c.Options = append(c.Options, opt)
		}
	}
	c.Nameservers = dedupe(c.Nameservers)
	c.Searches = dedupe(c.Searches)
	if len(c.Nameservers) > maxNameservers {
		c.Nameservers = c.Nameservers[:maxNameservers]
	}
	if len(c.Searches) > maxSearches {
		c.Searches = c.Searches[:maxSearches]
	}
	return c
}

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSuffix(s, "."); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// String renders the resolv.conf.
func (c DNSConf) String() string {
	var b strings.Builder
	for _, ns := range c.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(c.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.Searches, " "))
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	return b.String()
}
