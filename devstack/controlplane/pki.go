package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certSpec describes one certificate of the stack's PKI. A certificate without a signer is a CA.
type certSpec struct {
	name     string
	signer   string
	cn       string
	orgs     []string
	dnsNames []string
	ips      []net.IP
	usage    []x509.ExtKeyUsage
}

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

const certValidity = 10 * 365 * 24 * time.Hour

// ensurePKI writes every certificate and key the stack needs into dir, keeping the ones that exist,
// so that restarting a stack keeps its kubeconfigs valid.
func ensurePKI(dir string, specs []certSpec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	pairs := map[string]keyPair{}
	for _, s := range specs {
		kp, err := loadPair(dir, s.name)
		if errors.Is(err, os.ErrNotExist) {
			kp, err = issue(s, pairs)
			if err == nil {
				err = savePair(dir, s.name, kp)
			}
		}
		if err != nil {
			return fmt.Errorf("certificate %s: %w", s.name, err)
		}
		pairs[s.name] = kp
	}
	return nil
}

func issue(s certSpec, pairs map[string]keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return keyPair{}, fmt.Errorf("generate serial: %w", err)
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    now,
		NotAfter:     now.Add(certValidity),
		DNSNames:     s.dnsNames,
		IPAddresses:  s.ips,
		ExtKeyUsage:  s.usage,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	parent, signKey := tmpl, key
	if s.signer == "" {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		ca, ok := pairs[s.signer]
		if !ok {
			return keyPair{}, fmt.Errorf("signer %s is not issued yet", s.signer)
		}
		parent, signKey = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse issued certificate: %w", err)
	}
	return keyPair{cert: cert, key: key}, nil
}

func savePair(dir, name string, kp keyPair) error {
	keyDER, err := x509.MarshalECPrivateKey(kp.key)
	if err != nil {
		return fmt.Errorf("marshal key: %w", err)
	}
	if err := writePEM(filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", kp.cert.Raw, 0o644)
}

func loadPair(dir, name string) (keyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return keyPair{}, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, fmt.Errorf("%s: not PEM", name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse %s.crt: %w", name, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse %s.key: %w", name, err)
	}
	return keyPair{cert: cert, key: key}, nil
}

// ensureServiceAccountKey writes the key pair that signs and verifies service-account tokens.
func ensureServiceAccountKey(dir string) error {
	priv := filepath.Join(dir, "sa.key")
	if _, err := os.Stat(priv); err == nil {
		return nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}
	return writePEM(priv, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
