package source

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := (&File{Path: path}).Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "0123456789" || s.Size != 10 {
		t.Fatalf("read %q (%v), size %d", got, err, s.Size)
	}
	_, err = (&File{Path: filepath.Join(t.TempDir(), "none")}).Open(context.Background())
	if contract.ReasonOf(err) != contract.ReasonSourceNotFound {
		t.Fatalf("a missing file: %v", err)
	}
}
