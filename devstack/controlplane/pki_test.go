package controlplane

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/d8virt/devstack/localnet"
)

func TestPKIChainsAndIsStable(t *testing.T) {
	dir := t.TempDir()
	n, err := localnet.Default()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{StateDir: dir, BinDir: dir, PortBase: 6440, Net: n})
	if err != nil {
		t.Fatal(err)
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := ensurePKI(pkiDir, s.certSpecs()); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(pkiDir, "apiserver.crt"))
	if err := ensurePKI(pkiDir, s.certSpecs()); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(pkiDir, "apiserver.crt"))
	if string(before) != string(after) {
		t.Fatal("a second ensurePKI reissued the serving certificate")
	}

	tests := []struct {
		name, ca string
		usage    x509.ExtKeyUsage
		dnsName  string
		ip       net.IP
	}{
		{name: "apiserver", ca: "ca", usage: x509.ExtKeyUsageServerAuth, dnsName: "kubernetes.default.svc"},
		{name: "apiserver", ca: "ca", usage: x509.ExtKeyUsageServerAuth, ip: net.IP(n.GatewayIP().AsSlice())},
		{name: "apiserver", ca: "ca", usage: x509.ExtKeyUsageServerAuth, ip: net.ParseIP("10.121.40.1")}, // the Service kubernetes of port base 6440,
		{name: "admin", ca: "ca", usage: x509.ExtKeyUsageClientAuth},
		{name: "front-proxy-client", ca: "front-proxy-ca", usage: x509.ExtKeyUsageClientAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name+"/"+tc.dnsName+tc.ip.String(), func(t *testing.T) {
			ca, err := loadPair(pkiDir, tc.ca)
			if err != nil {
				t.Fatal(err)
			}
			kp, err := loadPair(pkiDir, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca.cert)
			if _, err := kp.cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}, CurrentTime: time.Now()}); err != nil {
				t.Fatalf("verify against %s: %v", tc.ca, err)
			}
			if tc.dnsName != "" {
				if err := kp.cert.VerifyHostname(tc.dnsName); err != nil {
					t.Fatal(err)
				}
			}
			if tc.ip != nil {
				if err := kp.cert.VerifyHostname(tc.ip.String()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if kp, _ := loadPair(pkiDir, "admin"); len(kp.cert.Subject.Organization) != 1 || kp.cert.Subject.Organization[0] != "system:masters" {
		t.Errorf("admin certificate is not in system:masters: %v", kp.cert.Subject)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BinDir: "/x", PortBase: 6440},
		{StateDir: "/x", PortBase: 6440},
		{StateDir: "/x", BinDir: "/x", PortBase: 0},
		{StateDir: "/x", BinDir: "/x", PortBase: 65533},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad configuration", cfg)
		}
	}
}
