package destination

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The layer is a tar that archive/tar reads back, with the sizes and digest it claims.
func TestDiskLayer(t *testing.T) {
	for _, size := range []int{0, 1, 511, 512, 513, 3 << 20} {
		file := filepath.Join(t.TempDir(), "disk.qcow2")
		data := bytes.Repeat([]byte{7}, size)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := newDiskLayer(file, "disk.qcow2")
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := l.Compressed()
		all, _ := io.ReadAll(rc)
		rc.Close()
		d, n, _ := v1.SHA256(bytes.NewReader(all))
		if got, _ := l.Digest(); got != d || n != int64(len(all)) || l.tarSize != n {
			t.Fatalf("size %d: digest %s/%s, size %d/%d", size, got, d, l.tarSize, n)
		}
		tr := tar.NewReader(bytes.NewReader(all))
		var names []string
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			names = append(names, h.Name)
			if h.Typeflag == tar.TypeReg {
				got, _ := io.ReadAll(tr)
				if !bytes.Equal(got, data) || h.Uid != diskOwner {
					t.Fatalf("size %d: the file differs (uid %d)", size, h.Uid)
				}
			}
		}
		if len(names) != 2 || names[0] != "disk/" || names[1] != "disk/disk.qcow2" {
			t.Fatalf("entries %v", names)
		}
	}
}
