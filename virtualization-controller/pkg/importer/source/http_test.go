package source

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/cabundle"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

var data = bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB

// flaky serves data, failing the first `fail` requests as `how` says.
type flaky struct {
	fail    int32
	how     string // "503", "cut" (half the body, then the connection closes), "cut-no-range"
	status  int    // a fixed status, for the error cases
	calls   atomic.Int32
	ranges  atomic.Int32
	noRange bool
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	if r.Header.Get("Range") != "" {
		f.ranges.Add(1)
	}
	if f.status != 0 {
		http.Error(w, http.StatusText(f.status), f.status)
		return
	}
	if n <= f.fail {
		switch f.how {
		case "503":
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		case "cut":
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.WriteHeader(http.StatusOK)
			w.Write(data[:len(data)/3])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
	}
	if f.noRange {
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, "disk.img", time.Time{}, bytes.NewReader(data))
}

func newHTTP(url string, client *http.Client, slept *[]time.Duration) *HTTP {
	return &HTTP{
		URL:     url,
		Client:  client,
		Backoff: Backoff{Initial: time.Second, Max: 4 * time.Second, Attempts: 4},
		Sleep: func(ctx context.Context, d time.Duration) error {
			*slept = append(*slept, d)
			return nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func TestHTTP(t *testing.T) {
	cases := []struct {
		name    string
		server  *flaky
		reason  contract.Reason // "" for success
		msg     string
		calls   int32
		ranges  int32
		sleeps  []time.Duration
		noSizes bool
	}{
		{name: "ok", server: &flaky{}, calls: 1},
		{name: "503 twice, then ok", server: &flaky{fail: 2, how: "503"}, calls: 3, sleeps: []time.Duration{time.Second, 2 * time.Second}},
		{name: "body cut, resumed with Range", server: &flaky{fail: 1, how: "cut"}, calls: 2, ranges: 1, sleeps: []time.Duration{time.Second}},
		{name: "body cut twice (no progress the second time), server ignores Range", server: &flaky{fail: 2, how: "cut", noRange: true}, calls: 3, ranges: 2, sleeps: []time.Duration{time.Second, 2 * time.Second}},
		{name: "always 503", server: &flaky{fail: 100, how: "503"}, reason: contract.ReasonSourceFailed, msg: "503", calls: 4, sleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{name: "404", server: &flaky{status: http.StatusNotFound}, reason: contract.ReasonSourceNotFound, msg: "404 Not Found: check the URL", calls: 1},
		{name: "410", server: &flaky{status: http.StatusGone}, reason: contract.ReasonSourceNotFound, calls: 1},
		{name: "403", server: &flaky{status: http.StatusForbidden}, reason: contract.ReasonSourceForbidden, msg: "credentials", calls: 1},
		{name: "400", server: &flaky{status: http.StatusBadRequest}, reason: contract.ReasonSourceFailed, msg: "400", calls: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.server)
			defer srv.Close()
			var slept []time.Duration
			got, err := read(newHTTP(srv.URL+"/disk.img", srv.Client(), &slept))
			check(t, got, err, tc.reason, tc.msg)
			if c := tc.server.calls.Load(); c != tc.calls {
				t.Errorf("%d requests, want %d", c, tc.calls)
			}
			if r := tc.server.ranges.Load(); r != tc.ranges {
				t.Errorf("%d Range requests, want %d", r, tc.ranges)
			}
			if !equalDurations(slept, tc.sleeps) {
				t.Errorf("slept %v, want %v", slept, tc.sleeps)
			}
		})
	}
}

func TestHTTPUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var slept []time.Duration
	_, err = read(newHTTP("http://"+addr+"/disk.img", http.DefaultClient, &slept))
	check(t, nil, err, contract.ReasonSourceUnreachable, "cannot reach")
	if len(slept) != 3 {
		t.Errorf("slept %v, want 3 retries", slept)
	}
}

func TestHTTPSCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(&flaky{})
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ca     string
		reason contract.Reason
	}{{"without the CA", "", contract.ReasonSourceUnreachable}, {"with the CA", ca, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := cabundle.Transport(tc.ca)
			if err != nil {
				t.Fatal(err)
			}
			var slept []time.Duration
			got, err := read(newHTTP(srv.URL+"/disk.img", &http.Client{Transport: tr}, &slept))
			check(t, got, err, tc.reason, "caBundle")
			if len(slept) != 0 {
				t.Errorf("a certificate error was retried: %v", slept)
			}
		})
	}
}

func read(h *HTTP) ([]byte, error) {
	s, err := h.Open(context.Background())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if s.Size != int64(len(data)) {
		return nil, contract.Errorf(contract.ReasonInternal, "size %d, want %d", s.Size, len(data))
	}
	return io.ReadAll(s)
}

func check(t *testing.T, got []byte, err error, reason contract.Reason, msg string) {
	t.Helper()
	if reason == "" {
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes that differ from the %d served", len(got), len(data))
		}
		return
	}
	if contract.ReasonOf(err) != reason || !strings.Contains(err.Error(), msg) {
		t.Fatalf("err = %v (%s), want %s mentioning %q", err, contract.ReasonOf(err), reason, msg)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
