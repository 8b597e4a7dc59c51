package export

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/source"
)

// request sends method to url with the bearer token and the Range rng (each unless empty), and
// returns the answer and its body.
func request(t *testing.T, method, url, token, rng string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestHandler(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk.img")
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(disk, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Path: disk, Token: "secret", Sent: NewSentCounter(), Log: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(h.Mux())
	defer srv.Close()
	for _, tc := range []struct {
		name, method, path, token, rng string
		code                           int
		body                           []byte
		length                         int64 // Content-Length of a success
	}{
		{name: "the disk", method: http.MethodGet, path: contract.ExportPath, token: "secret", code: 200, body: data, length: 3000},
		{name: "resumed", method: http.MethodGet, path: contract.ExportPath, token: "secret", rng: "bytes=2990-", code: 206, body: data[2990:], length: 10},
		{name: "head", method: http.MethodHead, path: contract.ExportPath, token: "secret", code: 200, body: []byte{}, length: 3000},
		{name: "no token", method: http.MethodGet, path: contract.ExportPath, code: 401},
		{name: "another token", method: http.MethodGet, path: contract.ExportPath, token: "guess", code: 403},
		{name: "put", method: http.MethodPut, path: contract.ExportPath, token: "secret", code: 405},
		{name: "elsewhere", method: http.MethodGet, path: "/disk.img", token: "secret", code: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := request(t, tc.method, srv.URL+tc.path, tc.token, tc.rng)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.code)
			}
			if tc.body != nil && string(body) != string(tc.body) {
				t.Fatalf("body of %d bytes, want %d", len(body), len(tc.body))
			}
			if tc.code/100 == 2 && resp.ContentLength != tc.length {
				t.Fatalf("Content-Length %d", resp.ContentLength)
			}
		})
	}
	if got := testutil.ToFloat64(h.Sent); got != float64(len(data)+10) {
		t.Fatalf("sent %v bytes, want %d", got, len(data)+10)
	}
}

// An image's disk is streamed whole for each request: a Range is ignored (200, the whole
// length), HEAD tells the length without reading the disk, an image that cannot be read is 502.
func TestImageHandler(t *testing.T) {
	data := []byte(strings.Repeat("qcow2 ", 500))
	opened := 0
	h := &Handler{Image: func(ctx context.Context) (source.Stream, error) {
		opened++
		return source.Stream{ReadCloser: io.NopCloser(bytes.NewReader(data)), Size: int64(len(data))}, nil
	}, Token: "secret", Sent: NewSentCounter(), Log: slog.New(slog.DiscardHandler)}
	broken := &Handler{Image: func(ctx context.Context) (source.Stream, error) {
		return source.Stream{}, errors.New("manifest unknown")
	}, Token: "secret", Sent: NewSentCounter(), Log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		name, method, token, rng string
		h                        *Handler
		code                     int
		body                     string
	}{
		{name: "the disk", method: http.MethodGet, token: "secret", h: h, code: 200, body: string(data)},
		{name: "a range asked, the whole disk sent", method: http.MethodGet, token: "secret", rng: "bytes=100-", h: h, code: 200, body: string(data)},
		{name: "head", method: http.MethodHead, token: "secret", h: h, code: 200, body: ""},
		{name: "no token", method: http.MethodGet, h: h, code: 401},
		{name: "the image cannot be read", method: http.MethodGet, token: "secret", h: broken, code: 502, body: "the image cannot be read: manifest unknown\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h.Mux())
			defer srv.Close()
			resp, body := request(t, tc.method, srv.URL+contract.ExportPath, tc.token, tc.rng)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.code)
			}
			if tc.code/100 == 2 && resp.ContentLength != int64(len(data)) {
				t.Errorf("Content-Length %d", resp.ContentLength)
			}
			if tc.code != 401 && string(body) != tc.body {
				t.Errorf("body %q..., want %d bytes", body[:min(len(body), 20)], len(tc.body))
			}
		})
	}
	if got := testutil.ToFloat64(h.Sent); got != float64(2*len(data)) {
		t.Errorf("sent %v bytes, want %d", got, 2*len(data))
	}
	if opened != 3 {
		t.Errorf("the image opened %d times, want once a request", opened)
	}
}
