package nodeagent

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The agent serves the one kubelet endpoint that makes `kubectl logs` work: the apiserver fetches
// GET /containerLogs/<namespace>/<pod>/<container> from the node's InternalIP and kubelet port,
// with follow, tailLines and limitBytes. A container's log is one file across its restarts, so
// previous=true is refused. The apiserver of the local stack does not verify kubelet serving
// certificates, so a self-signed one does.

// listenKubelet opens the kubelet port on the bridge address (port 0 picks a free one).
func listenKubelet(ip string, port int) (net.Listener, error) {
	cert, err := selfSignedCert(ip)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("kubelet port: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}

func selfSignedCert(ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "d8v-node-agent"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// serveKubelet serves the kubelet endpoints until ctx ends.
func (p *Provider) serveKubelet(ctx context.Context, ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", p.containerLogs)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		p.log.Error("kubelet endpoint stopped", "err", err)
	}
}

func (p *Provider) containerLogs(w http.ResponseWriter, req *http.Request) {
	ns, name, ctr := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	q := req.URL.Query()
	if q.Get("previous") == "true" {
		http.Error(w, "the d8v node agent keeps one log per container across restarts; previous logs are part of it", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	r := p.byUID[p.byName[ns+"/"+name]]
	p.mu.Unlock()
	if r == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on this node", ns, name), http.StatusNotFound)
		return
	}
	f, err := os.Open(p.layout.LogFile(r.uid, ctr))
	if err != nil {
		http.Error(w, fmt.Sprintf("container %q of pod %s/%s has no log: %v", ctr, ns, name, err), http.StatusNotFound)
		return
	}
	defer f.Close()
	tail, _ := strconv.Atoi(q.Get("tailLines"))
	limit, _ := strconv.ParseInt(q.Get("limitBytes"), 10, 64)
	if q.Has("tailLines") {
		if err := seekTail(f, tail); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	var out io.Writer = w
	if limit > 0 {
		out = &limitWriter{w: w, left: limit}
	}
	if _, err := io.Copy(out, f); err != nil || q.Get("follow") != "true" {
		return
	}
	flusher, _ := w.(http.Flusher)
	for {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-req.Context().Done():
			return
		case <-r.done:
			_, _ = io.Copy(out, f)
			return
		case <-time.After(250 * time.Millisecond):
		}
		if _, err := io.Copy(out, f); err != nil {
			return
		}
	}
}

// seekTail positions f at the start of its last n lines.
func seekTail(f *os.File, n int) error {
	if n <= 0 {
		_, err := f.Seek(0, io.SeekEnd)
		return err
	}
	var offsets []int64
	var pos int64
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			offsets = append(offsets, pos)
			pos += int64(len(line))
		}
		if err != nil {
			break
		}
	}
	start := int64(0)
	if len(offsets) > n {
		start = offsets[len(offsets)-n]
	}
	_, err := f.Seek(start, io.SeekStart)
	return err
}

// limitWriter stops writing after a number of bytes.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > l.left {
		b = b[:l.left]
	}
	n, err := l.w.Write(b)
	l.left -= int64(n)
	if err == nil && l.left <= 0 {
		err = io.EOF
	}
	return n, err
}
