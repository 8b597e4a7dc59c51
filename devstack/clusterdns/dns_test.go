package clusterdns

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/d8virt/devstack/servicetable"
)

var table = servicetable.Table{
	key("ns", "web"): {NamespacedName: key("ns", "web"), ClusterIP: netip.MustParseAddr("10.96.0.20")},
	key("ns", "db"): {NamespacedName: key("ns", "db"), Endpoints: []servicetable.Endpoint{
		{IP: netip.MustParseAddr("10.213.0.8")}, {IP: netip.MustParseAddr("10.213.0.9"), Hostname: "db-0"}}},
	key("ns", "ext"): {NamespacedName: key("ns", "ext"), ExternalName: "example.org"},
}

func TestAnswer(t *testing.T) {
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string // A addresses or CNAME targets
	}{
		{"web.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"WEB.NS.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"web.ns.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"db.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.213.0.8", "10.213.0.9"}},
		{"db-0.db.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.213.0.9"}},
		{"db-1.db.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"ext.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"example.org."}},
		{"10-213-0-4.ns.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.213.0.4"}},
		{"nope.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"x-y.ns.pod.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"gone.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"web.other.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"web.ns.svc.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, nil},
		{"cluster.local.", dns.TypeSOA, dns.RcodeSuccess, nil},
		{"web.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
	} {
		rcode, rrs := Answer(table, "cluster.local", dns.Question{Name: c.name, Qtype: c.qtype, Qclass: dns.ClassINET})
		var got []string
		for _, rr := range rrs {
			switch rr := rr.(type) {
			case *dns.A:
				got = append(got, rr.A.String())
			case *dns.CNAME:
				got = append(got, rr.Target)
			}
		}
		if rcode != c.rcode || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s: got %s %v, want %s %v", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[rcode], got, dns.RcodeToString[c.rcode], c.want)
		}
	}
}

type fakeUpstream map[string]error

func (f fakeUpstream) Exchange(m *dns.Msg, addr string) (*dns.Msg, time.Duration, error) {
	if err := f[addr]; err != nil {
		return nil, 0, err
	}
	r := new(dns.Msg).SetReply(m)
	r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{addr}}}
	return r, 0, nil
}

func TestForward(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	q := new(dns.Msg).SetQuestion("example.org.", dns.TypeA)
	s := NewServer("cluster.local", []string{"a:53", "b:53"}, fakeUpstream{"a:53": errors.New("timeout")}, log)
	if r := s.reply(q); len(r.Answer) != 1 || r.Answer[0].(*dns.TXT).Txt[0] != "b:53" {
		t.Errorf("forward: got %v, want the answer of the second upstream", r)
	}
	s = NewServer("cluster.local", []string{"a:53"}, fakeUpstream{"a:53": errors.New("timeout")}, log)
	if r := s.reply(q); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("forward without upstream: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	s.Update(table)
	r := s.reply(new(dns.Msg).SetQuestion("web.ns.svc.cluster.local.", dns.TypeA))
	if !r.Authoritative || len(r.Answer) != 1 {
		t.Errorf("cluster name: got %v", r)
	}
	r = s.reply(new(dns.Msg).SetQuestion("gone.ns.svc.cluster.local.", dns.TypeA))
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Errorf("unknown cluster name: got %v, want NXDOMAIN with an SOA", r)
	}
}

func FuzzAnswer(f *testing.F) {
	for _, n := range []string{"web.ns.svc.cluster.local.", "1-2-3-4.ns.pod.cluster.local.", "a.b.c.d.e.cluster.local.", "..cluster.local."} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		rcode, rrs := Answer(table, "cluster.local", dns.Question{Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET})
		if rcode != dns.RcodeSuccess && len(rrs) > 0 {
			t.Errorf("%q: records with rcode %d", name, rcode)
		}
	})
}
