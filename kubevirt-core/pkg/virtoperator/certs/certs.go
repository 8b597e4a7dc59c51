// Package certs keeps the self-signed certificates of one kubevirt-core installation: a CA and
// the leaf certificates it signs (virt-api's serving certificate, virt-handler's serving and client
// certificates). Everything is PEM in and PEM out, so the caller stores it in Secrets; the
// decisions (what to reissue, when to look again) are pure functions of the current set and the
// clock.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"time"
)

// KeyPair is a PEM certificate and its PEM private key.
type KeyPair struct {
	Cert []byte
	Key  []byte
}

// Leaf describes one certificate the CA issues.
type Leaf struct {
	CommonName string
	DNSNames   []string
	// Client makes a client certificate (clientAuth); otherwise it is a serving one (serverAuth).
	Client bool
}

// Policy sets lifetimes. A zero RenewBefore renews when less than a third of the certificate's
// lifetime is left.
type Policy struct {
	CALifetime      time.Duration
	CARenewBefore   time.Duration
	LeafLifetime    time.Duration
	LeafRenewBefore time.Duration
}

// Spec is the set of certificates wanted.
type Spec struct {
	Policy
	Leaves map[string]Leaf
}

// Set is the certificates of an installation.
type Set struct {
	// CA signs the leaves.
	CA KeyPair
	// Bundle is what peers trust: the current CA and earlier ones that have not expired yet, so
	// that certificates issued by a rotated CA stay valid while the pods holding them roll.
	Bundle []byte
	Leaves map[string]KeyPair
}

// CAName is the name Check reports for the CA.
const CAName = "ca"

// skew backdates certificates so that a node whose clock runs behind accepts them at once.
const skew = 5 * time.Minute

// minLifetime keeps a misconfigured lifetime from making every reconcile reissue certificates.
const minLifetime = time.Hour

// maxBundle bounds the CA bundle: a CA rotated more often than it expires must not grow it forever.
const maxBundle = 3

// Check reports which certificates must be (re)issued now, the CA first when it is among them,
// and the earliest later moment at which Check would answer differently (zero when never).
func Check(cur Set, spec Spec, now time.Time) (renew []string, next time.Time) {
	ca, _, err := parsePair(cur.CA)
	caOK := err == nil && ca.IsCA && now.Before(renewAt(ca, spec.CARenewBefore))
	if !caOK {
		renew = append(renew, CAName)
	} else {
		next = earliest(next, renewAt(ca, spec.CARenewBefore))
		for _, old := range previousCAs(cur.Bundle, ca, now) {
			// The bundle sheds an old CA when it expires.
			next = earliest(next, old.NotAfter)
		}
	}
	for _, name := range sortedKeys(spec.Leaves) {
		if !caOK {
			renew = append(renew, name)
			continue
		}
		cert, _, err := parsePair(cur.Leaves[name])
		if err != nil || !matches(cert, spec.Leaves[name]) || cert.CheckSignatureFrom(ca) != nil {
			renew = append(renew, name)
			continue
		}
		at := renewAt(cert, spec.LeafRenewBefore)
		if !now.Before(at) {
			renew = append(renew, name)
			continue
		}
		next = earliest(next, at)
	}
	return renew, next
}

// Ensure returns cur with every certificate that Check names reissued, and the bundle brought up
// to date. A new CA reissues every leaf. It does not modify cur.
func Ensure(cur Set, spec Spec, now time.Time) (Set, []string, error) {
	renew, _ := Check(cur, spec, now)
	out := Set{CA: cur.CA, Leaves: map[string]KeyPair{}}
	for name := range spec.Leaves {
		out.Leaves[name] = cur.Leaves[name]
	}
	var oldCA *x509.Certificate
	if c, _, err := parsePair(cur.CA); err == nil && c.IsCA {
		oldCA = c
	}
	if slices.Contains(renew, CAName) {
		pair, err := issueCA(spec.CALifetime, now)
		if err != nil {
			return Set{}, nil, err
		}
		out.CA = pair
	}
	ca, caKey, err := parsePair(out.CA)
	if err != nil {
		return Set{}, nil, fmt.Errorf("CA: %w", err)
	}
	for _, name := range renew {
		if name == CAName {
			continue
		}
		pair, err := issueLeaf(spec.Leaves[name], lifetime(spec.LeafLifetime), ca, caKey, now)
		if err != nil {
			return Set{}, nil, fmt.Errorf("certificate %s: %w", name, err)
		}
		out.Leaves[name] = pair
	}
	// The bundle: the current CA, then earlier ones still valid, newest first.
	prev := previousCAs(cur.Bundle, ca, now)
	if oldCA != nil && !oldCA.Equal(ca) && now.Before(oldCA.NotAfter) && !containsCert(prev, oldCA) {
		prev = append([]*x509.Certificate{oldCA}, prev...)
	}
	sort.SliceStable(prev, func(i, j int) bool { return prev[i].NotBefore.After(prev[j].NotBefore) })
	if len(prev) > maxBundle-1 {
		prev = prev[:maxBundle-1]
	}
	out.Bundle = append([]byte{}, pemCert(ca.Raw)...)
	for _, c := range prev {
		out.Bundle = append(out.Bundle, pemCert(c.Raw)...)
	}
	return out, renew, nil
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func sortedKeys(m map[string]Leaf) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func lifetime(d time.Duration) time.Duration { return max(d, minLifetime) }

// renewAt is when c should be replaced: renewBefore ahead of its expiry, or with a third of its
// lifetime left when renewBefore is unset or would leave no usable lifetime at all.
func renewAt(c *x509.Certificate, renewBefore time.Duration) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	if renewBefore <= 0 || renewBefore >= life {
		renewBefore = life / 3
	}
	return c.NotAfter.Add(-renewBefore)
}

func matches(c *x509.Certificate, want Leaf) bool {
	usage := x509.ExtKeyUsageServerAuth
	if want.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	got := slices.Clone(c.DNSNames)
	sort.Strings(got)
	wantNames := slices.Clone(want.DNSNames)
	sort.Strings(wantNames)
	return c.Subject.CommonName == want.CommonName && slices.Equal(got, wantNames) &&
		slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{usage})
}

// previousCAs are the CA certificates of bundle other than current that are still valid.
func previousCAs(bundle []byte, current *x509.Certificate, now time.Time) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range parseCerts(bundle) {
		if c.IsCA && !c.Equal(current) && now.Before(c.NotAfter) && !containsCert(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	return slices.ContainsFunc(list, c.Equal)
}

func parseCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// parsePair reads a certificate and checks that the key belongs to it.
func parsePair(p KeyPair) (*x509.Certificate, crypto.Signer, error) {
	certs := parseCerts(p.Cert)
	if len(certs) == 0 {
		return nil, nil, errors.New("no certificate")
	}
	b, _ := pem.Decode(p.Key)
	if b == nil {
		return nil, nil, errors.New("no private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		if k, err = x509.ParseECPrivateKey(b.Bytes); err != nil {
			return nil, nil, fmt.Errorf("parse private key: %w", err)
		}
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("private key of type %T cannot sign", k)
	}
	pub, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("public key: %w", err)
	}
	if !bytes.Equal(pub, certs[0].RawSubjectPublicKeyInfo) {
		return nil, nil, errors.New("private key does not belong to the certificate")
	}
	return certs[0], signer, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func issueCA(life time.Duration, now time.Time) (KeyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		// KubeVirt names its CA after the moment it was made; so do we, which also keeps
		// successive CAs apart in a bundle.
		Subject:   pkix.Name{CommonName: fmt.Sprintf("kubevirt.io@%d", now.Unix())},
		NotBefore: now.Add(-skew), NotAfter: now.Add(lifetime(life)),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue CA: %w", err)
	}
	return KeyPair{Cert: pemCert(der), Key: keyPEM}, nil
}

func issueLeaf(l Leaf, life time.Duration, ca *x509.Certificate, caKey crypto.Signer, now time.Time) (KeyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return KeyPair{}, err
	}
	usage := x509.ExtKeyUsageServerAuth
	if l.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	notAfter := now.Add(life)
	// A leaf never outlives its CA: peers would stop trusting it first.
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: l.CommonName},
		DNSNames:     slices.Clone(l.DNSNames),
		NotBefore:    now.Add(-skew), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issue: %w", err)
	}
	return KeyPair{Cert: pemCert(der), Key: keyPEM}, nil
}
