package htpasswd

import (
	"encoding/base64"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestFromDockerConfig(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("pusher:s3cret"))
	cases := []struct {
		name, config string
		users        map[string]string
		err          string
	}{
		{name: "the chart's Secret", config: `{"auths":{"dvcr.ns.svc:5000":{"username":"pusher","password":"s3cret","auth":"` + auth + `"}}}`,
			users: map[string]string{"pusher": "s3cret"}},
		{name: "auth only", config: `{"auths":{"dvcr.ns.svc":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("puller:p4ss")) + `"}}}`,
			users: map[string]string{"puller": "p4ss"}},
		{name: "one user at two addresses", config: `{"auths":{"a":{"username":"u","password":"p"},"b":{"username":"u","password":"p"}}}`,
			users: map[string]string{"u": "p"}},
		{name: "one user, two passwords", config: `{"auths":{"a":{"username":"u","password":"p"},"b":{"username":"u","password":"q"}}}`, err: "has two passwords"},
		{name: "no credentials", config: `{"auths":{}}`, err: "no credentials"},
		{name: "no password", config: `{"auths":{"a":{"username":"u"}}}`, err: "a password are needed"},
		{name: "not JSON", config: `htpasswd`, err: "not a .dockerconfigjson"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := FromDockerConfig([]byte(tc.config))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(lines) != len(tc.users) {
				t.Fatalf("lines %q", lines)
			}
			for _, l := range lines {
				user, hash, _ := strings.Cut(l, ":")
				if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(tc.users[user])); err != nil {
					t.Errorf("%s: %v", user, err)
				}
				if cost, err := bcrypt.Cost([]byte(hash)); err != nil || cost != Cost {
					t.Errorf("%s: cost %d, %v", user, cost, err)
				}
			}
		})
	}
}
