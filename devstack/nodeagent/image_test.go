package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestImageBinaryName(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"registry.example/d8v/virt-launcher:dev", "virt-launcher"},
		{"registry.example/d8v/virt-launcher", "virt-launcher"},
		{"virt-handler", "virt-handler"},
		{"busybox:1.36", "busybox"},
		{"docker.io/library/busybox@sha256:0123abcd", "busybox"},
		{"localhost:5000/tools/kube-api-rewriter:v1@sha256:feed", "kube-api-rewriter"},
		{"localhost:5000/virt-api", "virt-api"},
		{"", ""},
	} {
		if got := ImageBinaryName(tc.image); got != tc.want {
			t.Errorf("ImageBinaryName(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
}

func TestImageTag(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"registry.example/d8v/virt-launcher:dev", "dev"},
		{"localhost:5000/virt-api", ""},
		{"localhost:5000/virt-api:0.1.0", "0.1.0"},
		{"busybox:1.36", "1.36"},
		{"docker.io/library/busybox@sha256:0123abcd", ""},
		{"", ""},
	} {
		if got := ImageTag(tc.image); got != tc.want {
			t.Errorf("ImageTag(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
}

func TestResolveExecutable(t *testing.T) {
	fs := resolverFS{
		executable: func(p string) bool {
			return map[string]bool{"/repo/bin/virt-launcher": true, "/repo/bin/busybox": true,
				"/repo/bin/0.1.0/virt-launcher": true, "/repo/bin/0.1.0/kube-api-rewriter": true}[p]
		},
		lookPath: func(f string) (string, error) {
			switch f {
			case "sh", "/bin/sh":
				return "/bin/sh", nil
			case "/opt/tool":
				return "/opt/tool", nil
			}
			return "", errors.New("not found")
		},
	}
	for _, tc := range []struct {
		name            string
		binDir, image   string
		command, args   []string
		wantPath        string
		wantArgv        []string
		wantErrContains string
	}{
		{name: "image names the program", binDir: "/repo/bin", image: "registry.example/d8v/virt-launcher:dev",
			args: []string{"--name", "vm"}, wantPath: "/repo/bin/virt-launcher", wantArgv: []string{"/repo/bin/virt-launcher", "--name", "vm"}},
		{name: "command found in bin dir by basename", binDir: "/repo/bin", image: "whatever",
			command: []string{"/usr/bin/virt-launcher", "--x"}, args: []string{"y"},
			wantPath: "/repo/bin/virt-launcher", wantArgv: []string{"/usr/bin/virt-launcher", "--x", "y"}},
		{name: "bare command from PATH", binDir: "/repo/bin", image: "busybox",
			command: []string{"sh", "-c", "true"}, wantPath: "/bin/sh", wantArgv: []string{"sh", "-c", "true"}},
		{name: "absolute command", binDir: "/repo/bin", command: []string{"/opt/tool"}, args: []string{"a"},
			wantPath: "/opt/tool", wantArgv: []string{"/opt/tool", "a"}},
		{name: "bin dir wins over the absolute path", binDir: "/repo/bin", command: []string{"/bin/busybox", "httpd"},
			wantPath: "/repo/bin/busybox", wantArgv: []string{"/bin/busybox", "httpd"}},
		{name: "a tag's own build first", binDir: "/repo/bin", image: "d8v.local/virt-launcher:0.1.0",
			wantPath: "/repo/bin/0.1.0/virt-launcher", wantArgv: []string{"/repo/bin/0.1.0/virt-launcher"}},
		{name: "a tag's own command first", binDir: "/repo/bin", image: "d8v.local/kube-api-rewriter:0.1.0",
			command: []string{"kube-api-rewriter"}, wantPath: "/repo/bin/0.1.0/kube-api-rewriter", wantArgv: []string{"kube-api-rewriter"}},
		{name: "a tag without a build of its own", binDir: "/repo/bin", image: "d8v.local:5000/busybox:0.1.0",
			wantPath: "/repo/bin/busybox", wantArgv: []string{"/repo/bin/busybox"}},
		{name: "a tag that is no directory name", binDir: "/repo/bin", image: "d8v.local/virt-launcher:..",
			wantPath: "/repo/bin/virt-launcher", wantArgv: []string{"/repo/bin/virt-launcher"}},
		{name: "a digest is no tag", binDir: "/repo/bin", image: "d8v.local/virt-launcher@sha256:0.1.0",
			wantPath: "/repo/bin/virt-launcher", wantArgv: []string{"/repo/bin/virt-launcher"}},
		{name: "missing command", binDir: "/repo/bin", command: []string{"nope"}, wantErrContains: `command "nope"`},
		{name: "missing image program", binDir: "/repo/bin", image: "example/virt-exporter:1", wantErrContains: "/repo/bin/virt-exporter does not exist"},
		{name: "no bin dir for an image", image: "example/virt-launcher", wantErrContains: "no --bin-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, argv, err := resolveExecutable(fs, tc.binDir, tc.image, tc.command, tc.args)
			if tc.wantErrContains != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrContains) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErrContains)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p != tc.wantPath || !reflect.DeepEqual(argv, tc.wantArgv) {
				t.Errorf("got %s %q, want %s %q", p, argv, tc.wantPath, tc.wantArgv)
			}
		})
	}
}

func TestImportImage(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "in.qcow2")
	if err := os.WriteFile(disk, []byte("QFI\xfb rest of an image"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	ref := "registry.example/d8v/disks/alpine:3.20"
	p, err := ImportImage(store, ref, disk)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(store, "registry.example%2Fd8v%2Fdisks%2Falpine:3.20", "disk.qcow2"); p != want || p != ImagePath(store, ref) {
		t.Errorf("imported to %s, want %s", p, want)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("imported file mode: %v %v", st, err)
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("image dir mode: %v %v", st, err)
	}
	notQcow := filepath.Join(dir, "raw.img")
	_ = os.WriteFile(notQcow, []byte("raw"), 0o600)
	if _, err := ImportImage(store, "x", notQcow); err == nil {
		t.Error("a raw image was accepted")
	}
}

// TestPublishImageOncePerDigest: a second publish of the digest the store holds copies nothing,
// a new digest replaces the disk.
func TestPublishImageOncePerDigest(t *testing.T) {
	dir := t.TempDir()
	disk := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("QFI\xfb"+content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	store, ref := filepath.Join(dir, "store"), "dvcr.example/cvi/guest:latest"
	stored := func() string {
		b, err := os.ReadFile(ImagePath(store, ref))
		if err != nil {
			t.Fatal(err)
		}
		return string(b[4:])
	}
	for _, step := range []struct{ digest, disk, want string }{
		{"sha256:aa", disk("first", "first"), "first"},
		{"sha256:aa", disk("again", "again"), "first"}, // the same digest: not copied again
		{"sha256:bb", disk("second", "second"), "second"},
	} {
		if err := PublishImage(store, ref, step.digest, step.disk); err != nil {
			t.Fatal(err)
		}
		if got := stored(); got != step.want {
			t.Errorf("after publishing %s from %s the store holds %q, want %q", step.digest, step.disk, got, step.want)
		}
	}
	if err := os.Remove(ImagePath(store, ref)); err != nil {
		t.Fatal(err)
	}
	if err := PublishImage(store, ref, "sha256:bb", disk("lost", "lost")); err != nil || stored() != "lost" {
		t.Errorf("a recorded digest without its disk was not published again: %v", err)
	}
}
