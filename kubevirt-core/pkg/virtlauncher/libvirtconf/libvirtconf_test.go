package libvirtconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite checks that Write replaces the three files and leaves the rest of a seeded
// /etc/libvirt alone.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	seeded := filepath.Join(dir, "libvirt-admin.conf")
	for _, f := range []string{seeded, filepath.Join(dir, QEMUConf)} {
		if err := os.WriteFile(f, []byte("# from the image\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		LibvirtdConf: `auth_unix_rw = "none"`,
		VirtlogdConf: `log_outputs = "3:file:/var/log/libvirt/virtlogd.log"`,
		QEMUConf:     `stdio_handler = "logd"`,
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v; want it to contain %s, got:\n%s", name, err, want, b)
		}
	}
	if b, _ := os.ReadFile(seeded); string(b) != "# from the image\n" {
		t.Errorf("seeded file changed: %q", b)
	}
	if err := Write(filepath.Join(dir, "missing")); err == nil {
		t.Error("Write into a missing directory: no error")
	}
}

func TestWriteHostUUID(t *testing.T) {
	for _, tc := range []struct {
		name, uuid, want string
		fails            bool
	}{
		{name: "none", want: ""},
		{name: "own UUID", uuid: "5f0c2d0e-8a53-4a43-9d36-2f4c62f3e0a1", want: `host_uuid = "5f0c2d0e-8a53-4a43-9d36-2f4c62f3e0a1"`},
		{name: "quote", uuid: `x" y`, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := WriteOptions(dir, Options{HostUUID: tc.uuid})
			if (err != nil) != tc.fails {
				t.Fatalf("err %v, want failure %v", err, tc.fails)
			}
			if tc.fails {
				return
			}
			b, err := os.ReadFile(filepath.Join(dir, LibvirtdConf))
			if err != nil {
				t.Fatal(err)
			}
			has := strings.Contains(string(b), "host_uuid")
			if tc.want == "" && has || tc.want != "" && !strings.Contains(string(b), tc.want) {
				t.Errorf("libvirtd.conf:\n%s\nwant %q", b, tc.want)
			}
		})
	}
}
