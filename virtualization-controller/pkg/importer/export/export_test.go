package export

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

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
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.rng != "" {
				req.Header.Set("Range", tc.rng)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
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
