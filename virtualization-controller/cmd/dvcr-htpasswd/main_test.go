package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  bool
	}{
		{name: "one", args: []string{"/etc/dvcr/users/dvcr-pusher/.dockerconfigjson", "/run/dvcr/dvcr-pusher/htpasswd"}},
		{name: "two", args: []string{"/a/.dockerconfigjson", "/a/htpasswd", "/b/.dockerconfigjson", "/b/htpasswd"}},
		{name: "none", args: nil, err: true},
		{name: "a config without its file", args: []string{"/a/.dockerconfigjson", "/a/htpasswd", "/b/.dockerconfigjson"}, err: true},
		{name: "a flag", args: []string{"--out=/o"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse(tc.args); (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "config.json"), filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(in, []byte(`{"auths":{"dvcr:5000":{"username":"pusher","password":"pw"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]file{{config: in, out: out}}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(b), "pusher:$2a$04$") {
		t.Fatalf("htpasswd %q, %v", b, err)
	}
	if err := run([]file{{config: filepath.Join(dir, "missing"), out: out}}); err == nil {
		t.Fatal("a missing config written")
	}
}
