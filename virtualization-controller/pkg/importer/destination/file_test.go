package destination

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func disk(dataMiB, zeroMiB int) []byte {
	b := bytes.Repeat([]byte{0xab}, dataMiB<<20)
	return append(b, make([]byte, zeroMiB<<20)...)
}

func TestFile(t *testing.T) {
	cases := []struct {
		name      string
		data      []byte
		capacity  int64
		reason    contract.Reason
		maxStored int64 // allocated bytes at most
	}{
		{name: "data then zeros: a hole", data: disk(1, 3), maxStored: 1<<20 + 64<<10},
		{name: "odd tail", data: append(disk(1, 1), 1, 2, 3), maxStored: 1<<20 + 64<<10},
		{name: "fits exactly", data: disk(2, 0), capacity: 2 << 20, maxStored: 2<<20 + 64<<10},
		{name: "too large", data: disk(2, 1), capacity: 2 << 20, reason: contract.ReasonTooLarge},
		// The file is the capacity: the image's end, then holes.
		{name: "grows to the capacity", data: disk(1, 0), capacity: 3 << 20, maxStored: 1<<20 + 64<<10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "disk.img")
			f, err := OpenFile(path, tc.capacity)
			if err != nil {
				t.Fatal(err)
			}
			n, err := f.WriteRaw(bytes.NewReader(tc.data))
			if tc.reason != "" {
				if contract.ReasonOf(err) != tc.reason {
					t.Fatalf("WriteRaw = %v, want %s", err, tc.reason)
				}
				if err := f.Abort(); err != nil {
					t.Fatal(err)
				}
				left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
				if len(left) != 0 {
					t.Fatalf("left %v", left)
				}
				return
			}
			if err != nil || n != int64(len(tc.data)) {
				t.Fatalf("WriteRaw = %d, %v", n, err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the disk is in place before Commit: %v", err)
			}
			if err := f.Commit(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			want := tc.data
			if int64(len(want)) < tc.capacity {
				want = append(bytes.Clone(want), make([]byte, tc.capacity-int64(len(want)))...)
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the file differs (%d bytes, want %d, %v)", len(got), len(want), err)
			}
			if stored, err := f.Stored(); err != nil || stored > tc.maxStored {
				t.Fatalf("stored %d (%v), want at most %d", stored, err, tc.maxStored)
			}
		})
	}
}

func TestFits(t *testing.T) {
	f := &File{Capacity: 100}
	for _, tc := range []struct {
		n  int64
		ok bool
	}{{0, true}, {100, true}, {101, false}} {
		if err := f.Fits(tc.n); (err == nil) != tc.ok || (err != nil && contract.ReasonOf(err) != contract.ReasonTooLarge) {
			t.Errorf("Fits(%d) = %v", tc.n, err)
		}
	}
	if err := (&File{}).Fits(1 << 60); err != nil {
		t.Errorf("no capacity limits: %v", err)
	}
}
