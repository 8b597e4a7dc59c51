package svcproxy

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
)

// Daemon is the service proxy's name among a stack's daemons (record, log).
const Daemon = "service-proxy"

// StackComponent runs bin (service-proxy) as a daemon of the stack with the admin's credentials,
// for the stack's Service range and cluster DNS address, and NodePort Services at the nodes'
// address (the local network's gateway, every node agent's InternalIP); it is ready once the
// cluster DNS resolves the apiserver's Service.
func StackComponent(s *controlplane.Stack, bin string) controlplane.Component {
	cfg := s.Config()
	dnsAddr := netip.AddrPortFrom(cfg.ClusterDNSIP(), 53).String()
	name := "kubernetes.default.svc." + controlplane.ClusterDomain + "."
	args := []string{"--kubeconfig", s.KubeconfigPath(), "--service-cidr", cfg.ServicePrefix().String(),
		"--cluster-dns", cfg.ClusterDNSIP().String(), "--cluster-domain", controlplane.ClusterDomain}
	// Without a local network there are no nodes to serve node ports at.
	if n, err := localnet.Default(); err == nil {
		args = append(args, "--node-address", n.GatewayIP().String())
	}
	return controlplane.Component{
		Name: Daemon,
		Bin:  bin,
		Args: args,
		Ready: func(ctx context.Context) error {
			c := &dns.Client{Timeout: time.Second}
			r, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA), dnsAddr)
			if err != nil {
				return fmt.Errorf("cluster DNS %s: %w", dnsAddr, err)
			}
			if len(r.Answer) == 0 {
				return fmt.Errorf("cluster DNS %s: no address for %s yet (%s)", dnsAddr, name, dns.RcodeToString[r.Rcode])
			}
			return nil
		},
	}
}
