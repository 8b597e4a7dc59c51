package capscache

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCopy(t *testing.T) {
	root := t.TempDir()
	from := Dir(filepath.Join(root, "cache"))
	if err := os.MkdirAll(filepath.Join(from, "sub.xml"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"aa.xml": "<qemuCaps>a</qemuCaps>", "bb.xml": "<qemuCaps>b</qemuCaps>", "notes.txt": "x"} {
		if err := os.WriteFile(filepath.Join(from, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	to := filepath.Join(root, "node", "qemu-capabilities")
	// An older copy is replaced.
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, "aa.xml"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Copy(from, to)
	if err != nil || n != 2 {
		t.Fatalf("Copy = %d, %v; want the 2 XML files", n, err)
	}
	got := map[string]string{}
	entries, _ := os.ReadDir(to)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(to, e.Name()))
		got[e.Name()] = string(b)
		if st, _ := e.Info(); st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", e.Name(), st.Mode().Perm())
		}
	}
	if want := map[string]string{"aa.xml": "<qemuCaps>a</qemuCaps>", "bb.xml": "<qemuCaps>b</qemuCaps>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
	if n, err := Copy(filepath.Join(root, "missing"), filepath.Join(root, "fresh")); n != 0 || err != nil {
		t.Errorf("Copy from a missing directory = %d, %v; want nothing and no error", n, err)
	}
	if _, err := os.Stat(filepath.Join(root, "fresh")); !os.IsNotExist(err) {
		t.Errorf("an empty copy created its target: %v", err)
	}
}
