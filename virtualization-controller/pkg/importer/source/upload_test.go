package source

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func newUpload(t *testing.T, timeout time.Duration) (*Upload, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &Upload{Listener: l, Token: "s3cret", Timeout: timeout, Log: slog.New(slog.DiscardHandler)}
	t.Cleanup(u.Close)
	return u, "http://" + l.Addr().String() + contract.UploadPath
}

type answer struct {
	code int
	body string
	err  error
}

func send(method, url, auth, body string) answer {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, body: string(b)}
}

func TestUploadRefuses(t *testing.T) {
	u, url := newUpload(t, time.Minute)
	go func() { _, _ = u.Open(context.Background()) }()
	cases := []struct {
		name, method, auth string
		want               int
		wantBody           string
	}{
		{"no token", http.MethodPut, "", http.StatusUnauthorized, "no token"},
		{"wrong token", http.MethodPut, "Bearer guess", http.StatusForbidden, "not this image's upload token"},
		{"not a bearer token", http.MethodPut, "Basic s3cret", http.StatusForbidden, "not this image's upload token"},
		{"get", http.MethodGet, "Bearer s3cret", http.StatusMethodNotAllowed, "PUT or POST"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := send(tc.method, url, tc.auth, "data")
			if a.err != nil || a.code != tc.want || !strings.Contains(a.body, tc.wantBody) {
				t.Fatalf("%+v, want %d %q", a, tc.want, tc.wantBody)
			}
		})
	}
}

func TestUploadImports(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcome  error
		wantCode int
		wantBody string
	}{
		{"imported", nil, http.StatusOK, "imported"},
		{"failed", contract.Errorf(contract.ReasonNotDiskImage, "text is not a disk image"), http.StatusUnprocessableEntity, "NotDiskImage: text is not a disk image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, url := newUpload(t, time.Minute)
			answers := make(chan answer, 1)
			go func() { answers <- send(http.MethodPut, url, "Bearer s3cret", "disk data") }()
			s, err := u.Open(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if s.Size != int64(len("disk data")) {
				t.Fatalf("size %d", s.Size)
			}
			b, err := io.ReadAll(s)
			if err != nil || string(b) != "disk data" {
				t.Fatalf("%q %v", b, err)
			}
			if a := send(http.MethodPut, url, "Bearer s3cret", "again"); a.code != http.StatusConflict {
				t.Fatalf("second upload: %+v", a)
			}
			u.Finish(tc.outcome)
			if a := <-answers; a.err != nil || a.code != tc.wantCode || !strings.Contains(a.body, tc.wantBody) {
				t.Fatalf("%+v", a)
			}
		})
	}
}

func TestUploadTimesOut(t *testing.T) {
	u, url := newUpload(t, 50*time.Millisecond)
	_, err := u.Open(context.Background())
	if contract.ReasonOf(err) != contract.ReasonUploadTimeout || !strings.Contains(err.Error(), "no upload began within 50ms") {
		t.Fatalf("%v", err)
	}
	u.Finish(err)
	if a := send(http.MethodPut, url, "Bearer s3cret", "late"); a.err == nil {
		t.Fatalf("a late upload was answered: %+v", a)
	}
}
