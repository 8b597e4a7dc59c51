package qcow2

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// write makes a sparse raw disk of size bytes with data (random) at the given byte ranges.
func write(t *testing.T, size int64, data [][2]int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		b := make([]byte, d[1]-d[0])
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, d[0]); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestImageIsQcow2: qemu-img checks each image and reads it as the raw disk it came from;
// its size is what WriteTo writes and what Size says, and the clusters stored are the data's.
func TestImageIsQcow2(t *testing.T) {
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		t.Skip("qemu-img is not installed (hack/install-deps.sh)")
	}
	const mib = 1 << 20
	cases := []struct {
		name string
		size int64
		data [][2]int64
		// dataClusters stored
		clusters int64
	}{
		{name: "empty", size: 16 * mib, clusters: 0},
		{name: "one byte", size: 16 * mib, data: [][2]int64{{5 * mib, 5*mib + 1}}, clusters: 1},
		{name: "dense", size: 3 * mib, data: [][2]int64{{0, 3 * mib}}, clusters: 48},
		{name: "not a whole cluster long", size: 3*mib + 4096, data: [][2]int64{{3 * mib, 3*mib + 4096}}, clusters: 1},
		{name: "across L2 tables", size: 1200 * mib, data: [][2]int64{{0, 4096}, {512*mib - 8192, 512*mib + 8192}, {1199 * mib, 1200 * mib}}, clusters: 1 + 2 + 16},
		{name: "alternating", size: 64 * mib, data: [][2]int64{{0, mib}, {2 * mib, 3 * mib}, {10 * mib, 10*mib + 65536*3 + 1}}, clusters: 16 + 16 + 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := write(t, tc.size, tc.data)
			im, err := Open(raw)
			if err != nil {
				t.Fatal(err)
			}
			if im.data != tc.clusters {
				t.Errorf("data clusters %d, want %d (spans %v)", im.data, tc.clusters, im.spans)
			}
			out := filepath.Join(t.TempDir(), "disk.qcow2")
			var buf bytes.Buffer
			n, err := im.WriteTo(&buf)
			if err != nil || n != im.Size() || int64(buf.Len()) != im.Size() {
				t.Fatalf("wrote %d (%v), buffer %d, Size %d", n, err, buf.Len(), im.Size())
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			// Written twice, the same bytes (a push that is retried writes it again).
			var again bytes.Buffer
			if _, err := im.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
				t.Fatalf("a second WriteTo differs: %v", err)
			}
			if o, err := exec.Command(qemuImg, "check", "-f", "qcow2", out).CombinedOutput(); err != nil {
				t.Fatalf("qemu-img check: %v\n%s", err, o)
			}
			if o, err := exec.Command(qemuImg, "compare", "-f", "raw", "-F", "qcow2", raw, out).CombinedOutput(); err != nil {
				t.Fatalf("qemu-img compare: %v\n%s", err, o)
			}
			if o, err := exec.Command(qemuImg, "info", "-f", "qcow2", out).CombinedOutput(); err != nil || !strings.Contains(string(o), "compat: 1.1") {
				t.Fatalf("qemu-img info: %v\n%s", err, o)
			}
		})
	}
}

// readBack is the guest disk a qcow2 image of ours holds, read through its tables (standard
// clusters only), with every refcount checked to be 1 for the clusters in use and 0 after.
func readBack(t *testing.T, img []byte) []byte {
	be := binary.BigEndian
	if be.Uint32(img) != magic || be.Uint32(img[20:]) != clusterBits {
		t.Fatalf("header %x", img[:104])
	}
	virtual, l1Size, l1Off := int64(be.Uint64(img[24:])), int64(be.Uint32(img[36:])), int64(be.Uint64(img[40:]))
	rtOff, rtClusters := int64(be.Uint64(img[48:])), int64(be.Uint32(img[56:]))
	used := int64(len(img)) / clusterSize
	for c := int64(0); c < rtClusters*clusterSize/8; c++ {
		rb := int64(be.Uint64(img[rtOff+c*8:]))
		if rb == 0 {
			continue
		}
		for j := int64(0); j < rbEntries; j++ {
			want := uint16(0)
			if c*rbEntries+j < used {
				want = 1
			}
			if got := be.Uint16(img[rb+j*2:]); got != want {
				t.Fatalf("refcount of cluster %d: %d, want %d", c*rbEntries+j, got, want)
			}
		}
	}
	out := make([]byte, virtual)
	for i := int64(0); i < l1Size; i++ {
		l2 := int64(be.Uint64(img[l1Off+i*8:]) &^ flagCopied)
		if l2 == 0 {
			continue
		}
		for j := int64(0); j < l2Entries; j++ {
			d := int64(be.Uint64(img[l2+j*8:]) &^ flagCopied)
			g := (i*l2Entries + j) * clusterSize
			if d != 0 && g < virtual {
				copy(out[g:min(g+clusterSize, virtual)], img[d:d+clusterSize])
			}
		}
	}
	return out
}

// FuzzImage: any sparse disk (a size and data written at offsets) reads back through the tables
// of its image as it is, with its refcounts right.
func FuzzImage(f *testing.F) {
	f.Add(uint16(48), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint16(1), []byte{})
	f.Add(uint16(300), []byte{0, 255, 9, 9, 200, 1})
	f.Fuzz(func(t *testing.T, sizeKiB uint16, writes []byte) {
		size := int64(sizeKiB)*4096 + int64(len(writes))%4096
		p := filepath.Join(t.TempDir(), "disk.raw")
		disk := make([]byte, size)
		fh, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := fh.Truncate(size); err != nil {
			t.Fatal(err)
		}
		// Each pair of bytes writes a run of a value at an offset of the disk.
		for i := 0; i+1 < len(writes) && size > 0; i += 2 {
			off := int64(writes[i]) * size / 256
			n := min(int64(writes[i+1])*97+1, size-off)
			run := bytes.Repeat([]byte{writes[i+1] | 1}, int(n))
			copy(disk[off:], run)
			if _, err := fh.WriteAt(run, off); err != nil {
				t.Fatal(err)
			}
		}
		fh.Close()
		im, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if n, err := im.WriteTo(&buf); err != nil || n != im.Size() {
			t.Fatalf("wrote %d of %d: %v", n, im.Size(), err)
		}
		if got := readBack(t, buf.Bytes()); !bytes.Equal(got, disk) {
			t.Fatal("the image does not read back as the disk")
		}
	})
}
