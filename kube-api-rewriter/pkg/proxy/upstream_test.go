package proxy

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestUpstream(t *testing.T) {
	for _, c := range []struct {
		name, host, want, wantErr string
	}{
		{"https", "https://10.0.0.1:6443", "10.0.0.1:6443", ""},
		{"http with a path", "http://127.0.0.1:8080/prefix", "127.0.0.1:8080", ""},
		{"no host", "http://", "", `upstream apiserver address "http://": no host`},
		{"no scheme", "10.0.0.1:6443", "", `upstream apiserver address "10.0.0.1:6443": parse `},
		{"bad URL", "https://[::1", "", `upstream apiserver address "https://[::1": parse `},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, rt, err := Upstream(&rest.Config{Host: c.host})
			if c.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Host != c.want || rt == nil {
				t.Errorf("host %q, transport %v; want %q and a transport", u.Host, rt, c.want)
			}
		})
	}
}
