package isoimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite writes ISOs of directories as a Pod's volumes lay them out and reads them back with
// isoinfo, with Rock Ridge names as a Linux guest sees them.
func TestWrite(t *testing.T) {
	if _, err := exec.LookPath("isoinfo"); err != nil {
		t.Skip("isoinfo is not installed")
	}
	tests := []struct {
		name  string
		label string
		setup func(t *testing.T, dir string)
		files map[string]string // path on the ISO -> content
		gone  []string          // paths that must not be on the ISO
	}{
		{
			name:  "plain files and a subdirectory",
			label: "cfgdata",
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "app.conf"), "answer=42\n")
				write(t, filepath.Join(dir, "sub", "Mixed_Case.name"), "x")
				write(t, filepath.Join(dir, "a=b"), "equals")
			},
			files: map[string]string{"/app.conf": "answer=42\n", "/sub/Mixed_Case.name": "x", "/a=b": "equals"},
		},
		{
			name: "kubelet's atomic writer layout, no label",
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "..2026_12_01_12_00_00.1", "token"), "secret-token")
				link(t, "..2026_12_01_12_00_00.1", filepath.Join(dir, "..data"))
				link(t, "..data/token", filepath.Join(dir, "token"))
			},
			files: map[string]string{"/token": "secret-token"},
			gone:  []string{"/..data/token", "/..2026_12_01_12_00_00.1/token"},
		},
		{name: "empty directory", label: "empty", setup: func(*testing.T, string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := t.TempDir()
			tt.setup(t, src)
			out := t.TempDir()
			path := filepath.Join(out, "data.iso")
			if err := Write(context.Background(), path, tt.label, src); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The primary volume descriptor sits at 32 KiB, its volume identifier at offset 40.
			if len(b) < 0x8000+72 || string(b[0x8001:0x8006]) != "CD001" {
				t.Fatal("not an ISO 9660 image")
			}
			if label := strings.TrimSpace(string(b[0x8028 : 0x8028+32])); label != tt.label {
				t.Errorf("volume label %q, want %q", label, tt.label)
			}
			for name, want := range tt.files {
				got, _ := exec.Command("isoinfo", "-R", "-i", path, "-x", name).Output()
				if string(got) != want {
					t.Errorf("%s holds %q, want %q", name, got, want)
				}
			}
			listing, err := exec.Command("isoinfo", "-R", "-f", "-i", path).Output()
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range tt.gone {
				if strings.Contains(string(listing), name) {
					t.Errorf("%s is on the ISO:\n%s", name, listing)
				}
			}
			if m, _ := filepath.Glob(filepath.Join(out, ".*")); len(m) != 0 {
				t.Errorf("staging files left behind: %q", m)
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
