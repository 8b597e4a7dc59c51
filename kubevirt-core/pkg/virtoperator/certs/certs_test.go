package certs

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testSpec() Spec {
	return Spec{
		Policy: Policy{CALifetime: 300 * time.Hour, LeafLifetime: 30 * time.Hour},
		Leaves: map[string]Leaf{
			"server": {CommonName: "virt-api.kubevirt.svc", DNSNames: []string{"virt-api.kubevirt.svc", "virt-api"}},
			"client": {CommonName: "kubevirt.io:system:client:virt-handler", Client: true},
		},
	}
}

func mustEnsure(t *testing.T, cur Set, spec Spec, now time.Time) (Set, []string) {
	t.Helper()
	out, renewed, err := Ensure(cur, spec, now)
	if err != nil {
		t.Fatal(err)
	}
	return out, renewed
}

func TestEnsure(t *testing.T) {
	fresh, _ := mustEnsure(t, Set{}, testSpec(), t0)
	renamed := testSpec()
	renamed.Leaves["server"] = Leaf{CommonName: "virt-api.other.svc", DNSNames: []string{"virt-api.other.svc"}}
	swapped := fresh
	swapped.Leaves = map[string]KeyPair{
		"server": {Cert: fresh.Leaves["server"].Cert, Key: fresh.Leaves["client"].Key},
		"client": fresh.Leaves["client"],
	}
	explicit := testSpec()
	explicit.LeafRenewBefore = 25 * time.Hour

	tests := []struct {
		name  string
		cur   Set
		spec  Spec
		now   time.Time
		want  []string
		extra func(t *testing.T, before, after Set)
	}{
		{name: "empty set issues everything", cur: Set{}, spec: testSpec(), now: t0, want: []string{CAName, "client", "server"}},
		{name: "fresh set is left alone", cur: fresh, spec: testSpec(), now: t0.Add(time.Hour), want: nil,
			extra: func(t *testing.T, before, after Set) {
				if string(before.Leaves["server"].Cert) != string(after.Leaves["server"].Cert) || string(before.Bundle) != string(after.Bundle) {
					t.Error("an untouched set changed")
				}
			}},
		{name: "leaves renew with a third of their lifetime left", cur: fresh, spec: testSpec(), now: t0.Add(20 * time.Hour), want: []string{"client", "server"}},
		{name: "leaves keep before that", cur: fresh, spec: testSpec(), now: t0.Add(19 * time.Hour), want: nil},
		{name: "explicit renewBefore", cur: fresh, spec: explicit, now: t0.Add(6 * time.Hour), want: []string{"client", "server"}},
		{name: "changed names reissue only that leaf", cur: fresh, spec: renamed, now: t0.Add(time.Hour), want: []string{"server"}},
		{name: "a key of another certificate is replaced", cur: swapped, spec: testSpec(), now: t0.Add(time.Hour), want: []string{"server"}},
		{name: "an expiring CA reissues everything and stays in the bundle", cur: fresh, spec: testSpec(), now: t0.Add(200 * time.Hour),
			want: []string{CAName, "client", "server"},
			extra: func(t *testing.T, before, after Set) {
				bundle := parseCerts(after.Bundle)
				oldCA := parseCerts(before.CA.Cert)[0]
				newCA := parseCerts(after.CA.Cert)[0]
				if len(bundle) != 2 || !bundle[0].Equal(newCA) || !bundle[1].Equal(oldCA) {
					t.Errorf("bundle has %d certificates, want the new CA then the old one", len(bundle))
				}
			}},
		{name: "an expired old CA leaves the bundle", cur: func() Set {
			rotated, _ := mustEnsure(t, fresh, testSpec(), t0.Add(200*time.Hour))
			return rotated
		}(), spec: testSpec(), now: t0.Add(301 * time.Hour), want: []string{"client", "server"},
			extra: func(t *testing.T, _, after Set) {
				if n := len(parseCerts(after.Bundle)); n != 1 {
					t.Errorf("bundle has %d certificates after the old CA expired, want 1", n)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, renewed := mustEnsure(t, tt.cur, tt.spec, tt.now)
			if !slices.Equal(renewed, tt.want) {
				t.Errorf("renewed %v, want %v", renewed, tt.want)
			}
			verify(t, got, tt.spec, tt.now)
			if again, _ := Check(got, tt.spec, tt.now); len(again) != 0 {
				t.Errorf("Check after Ensure still wants %v", again)
			}
			if tt.extra != nil {
				tt.extra(t, tt.cur, got)
			}
		})
	}
}

// verify checks that every leaf is what the spec asks for and chains to the bundle.
func verify(t *testing.T, s Set, spec Spec, now time.Time) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Bundle) {
		t.Fatal("bundle holds no certificate")
	}
	for name, leaf := range spec.Leaves {
		pair := s.Leaves[name]
		if _, err := tls.X509KeyPair(pair.Cert, pair.Key); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c := parseCerts(pair.Cert)[0]
		usage := x509.ExtKeyUsageServerAuth
		if leaf.Client {
			usage = x509.ExtKeyUsageClientAuth
		}
		opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}
		if len(leaf.DNSNames) > 0 {
			opts.DNSName = leaf.DNSNames[0]
		}
		if _, err := c.Verify(opts); err != nil {
			t.Errorf("%s does not verify: %v", name, err)
		}
		ca := parseCerts(s.CA.Cert)[0]
		if c.NotAfter.After(ca.NotAfter) {
			t.Errorf("%s outlives its CA", name)
		}
	}
}

func TestCheckNext(t *testing.T) {
	s, _ := mustEnsure(t, Set{}, testSpec(), t0)
	renew, next := Check(s, testSpec(), t0)
	if len(renew) != 0 {
		t.Fatalf("fresh set wants %v", renew)
	}
	// The leaves live 30h from t0-5m; renewal comes with a third of that left.
	want := t0.Add(30*time.Hour - (30*time.Hour+5*time.Minute)/3)
	if !next.Equal(want) {
		t.Errorf("next check at %v, want %v", next, want)
	}
}

func TestMinimumLifetime(t *testing.T) {
	spec := testSpec()
	spec.CALifetime, spec.LeafLifetime = time.Second, time.Second
	s, _ := mustEnsure(t, Set{}, spec, t0)
	if renew, _ := Check(s, spec, t0.Add(time.Minute)); len(renew) != 0 {
		t.Errorf("a one-second lifetime makes every check reissue %v", renew)
	}
}
