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
