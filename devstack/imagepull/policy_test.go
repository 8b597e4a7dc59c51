package imagepull

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		policy corev1.PullPolicy
		image  string
		cached bool
		pull   bool
		never  bool
	}{
		{corev1.PullAlways, "r:5000/a:v1", true, true, false},
		{corev1.PullIfNotPresent, "r:5000/a:v1", true, false, false},
		{corev1.PullIfNotPresent, "r:5000/a:v1", false, true, false},
		{corev1.PullNever, "r:5000/a:v1", true, false, false},
		{corev1.PullNever, "r:5000/a:v1", false, false, true},
		{"", "r:5000/a", true, true, false},
		{"", "r:5000/a:latest", true, true, false},
		{"", "r:5000/a:v1", true, false, false},
	} {
		pull, err := Decide(c.policy, c.image, c.cached)
		if pull != c.pull || errors.Is(err, ErrNeverPull) != c.never {
			t.Errorf("Decide(%q, %q, cached %v) = %v, %v", c.policy, c.image, c.cached, pull, err)
		}
	}
	if _, err := Decide("Sometimes", "r/a", false); err == nil {
		t.Error("an unknown policy is accepted")
	}
}

func TestAuthenticator(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	secret := func(name string, typ corev1.SecretType, key, data string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: typ, Data: map[string][]byte{key: []byte(data)}}
	}
	secrets := []*corev1.Secret{
		secret("opaque", corev1.SecretTypeOpaque, "x", "{}"),
		secret("other", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":{"other:5000":{"auth":"`+b64("o:p")+`"}}}`),
		secret("dvcr", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":{"https://dvcr:5000/v1/":{"auth":"`+b64("puller:s3cret")+`"}}}`),
		secret("old", corev1.SecretTypeDockercfg, corev1.DockerConfigKey, `{"legacy:5000":{"username":"u","password":"pw"}}`),
	}
	for _, c := range []struct {
		registry   string
		user, pass string
	}{
		{"dvcr:5000", "puller", "s3cret"},
		{"legacy:5000", "u", "pw"},
		{"other:5000", "o", "p"},
		{"none:5000", "", ""},
	} {
		a, err := Authenticator(secrets, c.registry)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != c.user || cfg.Password != c.pass {
			t.Errorf("%s: got %s:%s, want %s:%s", c.registry, cfg.Username, cfg.Password, c.user, c.pass)
		}
		if c.user == "" && a != authn.Anonymous {
			t.Errorf("%s: not anonymous", c.registry)
		}
	}
	bad := []*corev1.Secret{secret("bad", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, "not json")}
	if _, err := Authenticator(bad, "dvcr:5000"); err == nil {
		t.Error("a broken secret is accepted")
	}
}

func tarOf(t *testing.T, entries ...tar.Header) *bytes.Buffer {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := []byte(h.Linkname)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
			body = []byte(h.Name)
			h.Linkname = ""
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(body)
		}
	}
	tw.Close()
	return &buf
}

func TestUntar(t *testing.T) {
	dir := t.TempDir()
	err := Untar(tarOf(t,
		tar.Header{Name: "disk/", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "disk/disk.qcow2", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "disk/disk.qcow2"},
		tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "disk/disk.qcow2"},
	), dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "disk", "disk.qcow2")); err != nil || string(b) != "disk/disk.qcow2" {
		t.Errorf("disk: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); err != nil {
		t.Errorf("../escape was not kept inside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("../escape left the directory")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hard")); err != nil || string(b) != "disk/disk.qcow2" {
		t.Errorf("hard link: %q %v", b, err)
	}
	// An entry through a symlink would be written wherever the link points.
	out := t.TempDir()
	err = Untar(tarOf(t,
		tar.Header{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: out},
		tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644},
	), t.TempDir())
	if err == nil {
		t.Error("an entry through a symlink was written")
	}
	if _, err := os.Stat(filepath.Join(out, "passwd")); err == nil {
		t.Error("the entry landed outside")
	}
}

// FuzzUntar feeds arbitrary streams: whatever Untar accepts stays inside its directory.
func FuzzUntar(f *testing.F) {
	f.Add([]byte{})
	var seed bytes.Buffer
	tw := tar.NewWriter(&seed)
	_ = tw.WriteHeader(&tar.Header{Name: "a/../../b", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"})
	_ = tw.WriteHeader(&tar.Header{Name: "l/c", Typeflag: tar.TypeReg, Mode: 0o644})
	_ = tw.Close()
	f.Add(seed.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "root")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = Untar(bytes.NewReader(data), dir)
		entries, err := os.ReadDir(parent)
		if err != nil || len(entries) != 1 {
			t.Errorf("Untar wrote beside its directory: %v %v", entries, err)
		}
	})
}

// TestNodeAuthenticator: the node's own credentials file for a registry, as kubelet's config.json.
func TestNodeAuthenticator(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.json", `{"auths": {"dvcr.ns.svc": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("puller:secret"))+`"}}}`)
	other := file("other.json", `{"auths": {"registry.example": {"username": "u", "password": "p"}}}`)
	broken := file("broken.json", `{"auths": `)
	for _, tc := range []struct {
		name       string
		host       Host
		user, pass string
		err        string
	}{
		{name: "no auth file: anonymous", host: Host{CA: "/ca.pem"}},
		{name: "the registry's credentials", host: Host{Auth: good}, user: "puller", pass: "secret"},
		{name: "a file for other registries: anonymous", host: Host{Auth: other}},
		{name: "a missing file", host: Host{Auth: filepath.Join(dir, "nope.json")}, err: "node credentials"},
		{name: "a broken file", host: Host{Auth: broken}, err: "node credentials " + broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NodeAuthenticator(tc.host, "dvcr.ns.svc")
			if tc.err != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.err)) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.user == "" {
				if a != authn.Anonymous {
					t.Fatalf("authenticator %v, want anonymous", a)
				}
				return
			}
			cfg, err := a.Authorization()
			if err != nil || cfg.Username != tc.user || cfg.Password != tc.pass {
				t.Fatalf("credentials %+v, %v; want %s:%s", cfg, err, tc.user, tc.pass)
			}
		})
	}
}
