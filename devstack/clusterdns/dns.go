// Package clusterdns is the local stack's cluster DNS, as CoreDNS's kubernetes plugin serves it:
// <svc>.<ns>.svc.<domain> is a Service's cluster IP (a headless Service's ready endpoints, an
// ExternalName Service's CNAME), <hostname>.<svc>.<ns>.svc.<domain> an endpoint with that
// hostname, <a-b-c-d>.<ns>.pod.<domain> the address a.b.c.d. Other names are forwarded to the
// upstream resolvers (the host's).
package clusterdns

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/d8virt/devstack/servicetable"
)

// TTL of every answer, in seconds: short, since Services change under tests.
const TTL = 5

// Answer decides the reply to one question about a name under domain (lower case, no trailing
// dot): the response code and the answer records. A name that exists but has no record of the
// asked type gets NOERROR and no records, as RFC 2308 wants; an unknown one NXDOMAIN.
func Answer(t servicetable.Table, domain string, q dns.Question) (int, []dns.RR) {
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	rel, ok := strings.CutSuffix(name, "."+domain)
	if !ok {
		if name == domain {
			return dns.RcodeSuccess, nil
		}
		return dns.RcodeNameError, nil
	}
	labels := strings.Split(rel, ".")
	var ips []netip.Addr
	var cname string
	switch n := len(labels); {
	case n == 1 && (labels[0] == "svc" || labels[0] == "pod"):
		return dns.RcodeSuccess, nil
	case n == 2 && (labels[1] == "svc" || labels[1] == "pod"):
		return dns.RcodeSuccess, nil // a namespace's zone: exists, holds no records itself
	case n == 3 && labels[2] == "pod":
		ip, err := netip.ParseAddr(strings.ReplaceAll(labels[0], "-", "."))
		if err != nil || !ip.Is4() {
			return dns.RcodeNameError, nil
		}
		ips = []netip.Addr{ip}
	case n == 3 && labels[2] == "svc":
		s, ok := t[key(labels[1], labels[0])]
		if !ok {
			return dns.RcodeNameError, nil
		}
		switch {
		case s.ExternalName != "":
			cname = s.ExternalName
		case s.Headless():
			for _, e := range s.Endpoints {
				ips = append(ips, e.IP)
			}
		default:
			ips = []netip.Addr{s.ClusterIP}
		}
	case n == 4 && labels[3] == "svc":
		s, ok := t[key(labels[2], labels[1])]
		if !ok {
			return dns.RcodeNameError, nil
		}
		for _, e := range s.Endpoints {
			if e.Hostname == labels[0] {
				ips = append(ips, e.IP)
			}
		}
		if len(ips) == 0 {
			return dns.RcodeNameError, nil
		}
	default:
		return dns.RcodeNameError, nil
	}
	hdr := func(rrtype uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: TTL}
	}
	var rrs []dns.RR
	if cname != "" {
		if q.Qtype == dns.TypeCNAME || q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
			rrs = append(rrs, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: dns.Fqdn(cname)})
		}
		return dns.RcodeSuccess, rrs
	}
	if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
		for _, ip := range ips {
			rrs = append(rrs, &dns.A{Hdr: hdr(dns.TypeA), A: ip.AsSlice()})
		}
	}
	return dns.RcodeSuccess, rrs
}

func key(ns, name string) servicetable.Key { return servicetable.Key{Namespace: ns, Name: name} }

// Exchanger asks an upstream resolver; *dns.Client is one.
type Exchanger interface {
	Exchange(m *dns.Msg, address string) (*dns.Msg, time.Duration, error)
}

// Server answers for the cluster domain from the last table and forwards the rest.
type Server struct {
	domain    string
	upstreams []string
	client    Exchanger
	log       *slog.Logger
	table     atomic.Pointer[servicetable.Table]
}

// NewServer serves domain (such as cluster.local) and forwards other names to upstreams
// (host:port) through client. Until the first Update it knows no Service.
func NewServer(domain string, upstreams []string, client Exchanger, log *slog.Logger) *Server {
	s := &Server{domain: strings.ToLower(strings.TrimSuffix(domain, ".")), upstreams: upstreams, client: client, log: log}
	s.Update(servicetable.Table{})
	return s
}

// Update replaces the table the answers come from.
func (s *Server) Update(t servicetable.Table) { s.table.Store(&t) }

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := s.reply(r)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("write answer", "err", err)
	}
}

func (s *Server) reply(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	if len(r.Question) != 1 {
		return m.SetRcode(r, dns.RcodeFormatError)
	}
	q := r.Question[0]
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	if name != s.domain && !strings.HasSuffix(name, "."+s.domain) {
		return s.forward(r)
	}
	rcode, rrs := Answer(*s.table.Load(), s.domain, q)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	m.RecursionAvailable = true
	m.Answer = rrs
	if len(rrs) == 0 {
		m.Ns = []dns.RR{s.soa()}
	}
	return m
}

func (s *Server) soa() dns.RR {
	return &dns.SOA{Hdr: dns.RR_Header{Name: s.domain + ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns: "ns.dns." + s.domain + ".", Mbox: "hostmaster." + s.domain + ".", Serial: 1,
		Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL}
}

// forward asks each upstream in turn and relays the first answer; SERVFAIL when none answers.
func (s *Server) forward(r *dns.Msg) *dns.Msg {
	var errs []string
	for _, up := range s.upstreams {
		resp, _, err := s.client.Exchange(r, up)
		if err == nil {
			return resp
		}
		errs = append(errs, fmt.Sprintf("%s: %v", up, err))
	}
	s.log.Debug("no upstream answers", "name", r.Question[0].Name, "errors", errs)
	return new(dns.Msg).SetRcode(r, dns.RcodeServerFailure)
}
