package proc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPidFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.pid")
	if got := ReadPidFile(p); got != 0 {
		t.Errorf("missing file: %d", got)
	}
	if err := WritePidFile(p, 4321); err != nil {
		t.Fatal(err)
	}
	if got := ReadPidFile(p); got != 4321 {
		t.Errorf("read %d, want 4321", got)
	}
	for content, want := range map[string]int{"17\n": 17, " 9 ": 9, "": 0, "x": 0, "-3": 0, "0": 0} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := ReadPidFile(p); got != want {
			t.Errorf("%q: read %d, want %d", content, got, want)
		}
	}
}
