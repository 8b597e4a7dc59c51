// Package cabundle makes the HTTP transports the importer talks through: the system's roots plus
// the CAs of a PEM bundle (an object's caBundle, DVCR's CA).
package cabundle

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// Transport is http.DefaultTransport's clone trusting the PEM CAs in file as well; file "" adds none.
func Transport(file string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if file == "" {
		return t, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s: no PEM certificate in it", file)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}
