// Package certreload serves a TLS key pair from files and picks up a renewed pair without a
// restart, as certificates mounted from a Secret are replaced in place.
package certreload

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reloader returns the current certificate, re-reading the files when their modification time
// changes. A renewal that fails to parse keeps the last good pair, so a half-written Secret update
// never takes the listener down.
type Reloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	lastLoad time.Time
	lastErr  error
}

// checkEvery bounds how often the files are stat'ed under load.
const checkEvery = time.Second

// New loads the pair once, so that a bad configuration fails at start-up.
func New(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is the tls.Config hook.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastLoad) >= checkEvery {
		r.lastErr = r.reloadLocked()
	}
	return r.cert, nil
}

// LastError reports why the last reload failed, for health checks.
func (r *Reloader) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

func (r *Reloader) reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reloadLocked()
}

func (r *Reloader) reloadLocked() error {
	r.lastLoad = time.Now()
	cs, err := os.Stat(r.certFile)
	if err != nil {
		return fmt.Errorf("stat certificate: %w", err)
	}
	ks, err := os.Stat(r.keyFile)
	if err != nil {
		return fmt.Errorf("stat key: %w", err)
	}
	if r.cert != nil && cs.ModTime().Equal(r.certMod) && ks.ModTime().Equal(r.keyMod) {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load key pair %s, %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.certMod, r.keyMod = &pair, cs.ModTime(), ks.ModTime()
	return nil
}
