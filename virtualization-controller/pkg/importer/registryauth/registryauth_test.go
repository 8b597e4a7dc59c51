package registryauth

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestKeychain(t *testing.T) {
	cases := []struct {
		name   string
		config string
		image  string
		want   *authn.AuthConfig // nil: anonymous
		err    string
	}{
		{name: "auth field", config: `{"auths":{"dvcr.example:5000":{"auth":"cHVzaGVyOnMzY3IzdA=="}}}`, image: "dvcr.example:5000/cvi/a:latest", want: &authn.AuthConfig{Username: "pusher", Password: "s3cr3t"}},
		{name: "username and password", config: `{"auths":{"reg.example":{"username":"u","password":"p:w"}}}`, image: "reg.example/x", want: &authn.AuthConfig{Username: "u", Password: "p:w"}},
		{name: "URL key", config: `{"auths":{"https://reg.example/v1/":{"username":"u","password":"p"}}}`, image: "reg.example/x", want: &authn.AuthConfig{Username: "u", Password: "p"}},
		{name: "other registry", config: `{"auths":{"reg.example":{"username":"u","password":"p"}}}`, image: "other.example/x"},
		{name: "not json", config: `auths:`, err: "not a .dockerconfigjson"},
		{name: "bad base64", config: `{"auths":{"r":{"auth":"***"}}}`, err: "not base64"},
		{name: "no colon", config: `{"auths":{"r":{"auth":"dXNlcg=="}}}`, err: "not user:password"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Parse([]byte(tc.config))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ref, err := name.ParseReference(tc.image)
			if err != nil {
				t.Fatal(err)
			}
			a, err := k.Resolve(ref.Context())
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if a != authn.Anonymous {
					t.Fatalf("want anonymous, got %v", a)
				}
				return
			}
			got, err := a.Authorization()
			if err != nil {
				t.Fatal(err)
			}
			if *got != *tc.want {
				t.Fatalf("got %+v, want %+v", *got, *tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"auths":{"dvcr.example:5000":{"auth":"cHVzaGVyOnMzY3IzdA=="}}}`))
	f.Add([]byte(`{"auths":{"https://reg.example/v1/":{"username":"u","password":"p"}}}`))
	f.Add([]byte(`{"auths":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Parse(b)
		if err != nil {
			return
		}
		for host := range k {
			if strings.Contains(host, "/") {
				t.Fatalf("key %q keeps a path", host)
			}
		}
	})
}
