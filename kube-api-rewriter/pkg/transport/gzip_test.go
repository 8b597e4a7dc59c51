package transport

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"
)

func gzipped(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := io.WriteString(zw, s); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGzip: an answer the engine does not restore reaches a client that takes gzip compressed as
// the apiserver sent it; one it restores is inflated by the engine. A client that does not take
// gzip is not sent it.
func TestGzip(t *testing.T) {
	for _, tc := range []struct {
		name, clientAE, respCT, body string
		wantUpAE                     string
		wantCompressed               bool
		want                         string
	}{
		{name: "restored", clientAE: "gzip", respCT: "application/json", body: vmJSONC, wantUpAE: "gzip", want: vmJSON},
		{name: "not JSON, passed on compressed", clientAE: "gzip, br", respCT: "application/vnd.kubernetes.protobuf", body: "k8s\x00proto", wantUpAE: "gzip", wantCompressed: true},
		{name: "client without gzip", clientAE: "", respCT: "application/json", body: vmJSONC, wantUpAE: "", want: vmJSON},
		{name: "gzip refused", clientAE: "gzip;q=0, identity", respCT: "application/json", body: vmJSONC, wantUpAE: "", want: vmJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &stub{respond: func(req *http.Request) *http.Response {
				if req.Header.Get("Accept-Encoding") != "gzip" {
					return response(req, http.StatusOK, tc.respCT, c(tc.body))
				}
				r := response(req, http.StatusOK, tc.respCT, string(gzipped(t, c(tc.body))))
				r.Header.Set("Content-Encoding", "gzip")
				return r
			}}
			rt, _ := newEngine(up)
			req := newRequest(t, "GET", vmPath+"/vm", "", nil)
			if tc.clientAE != "" {
				req.Header.Set("Accept-Encoding", tc.clientAE)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if got := up.calls()[0].Header.Get("Accept-Encoding"); got != tc.wantUpAE {
				t.Errorf("asked the apiserver for %q, want %q", got, tc.wantUpAE)
			}
			if tc.wantCompressed {
				if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, gzipped(t, c(tc.body))) {
					t.Errorf("not passed on compressed: %q %q", resp.Header.Get("Content-Encoding"), body)
				}
				return
			}
			if resp.Header.Get("Content-Encoding") != "" || !jsonEqual(t, body, []byte(tc.want)) {
				t.Errorf("Content-Encoding %q, body %s", resp.Header.Get("Content-Encoding"), body)
			}
		})
	}
}
