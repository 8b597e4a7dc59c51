package importer

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/checksum"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/destination"
	"github.com/d8virt/virtualization-controller/pkg/importer/progress"
	"github.com/d8virt/virtualization-controller/pkg/importer/source"
)

func TestPlanFor(t *testing.T) {
	cases := []struct {
		format     string
		toRegistry bool
		want       plan
	}{
		{contract.FormatRaw, false, plan{stream: true}},
		{contract.FormatISO, false, plan{stream: true}},
		{contract.FormatQcow2, false, plan{check: true, convertTo: contract.FormatRaw}},
		{contract.FormatVMDK, false, plan{convertTo: contract.FormatRaw}},
		{contract.FormatVDI, false, plan{convertTo: contract.FormatRaw}},
		{contract.FormatRaw, true, plan{convertTo: contract.FormatQcow2, diskName: "disk.qcow2"}},
		{contract.FormatISO, true, plan{diskName: "disk.iso"}},
		{contract.FormatQcow2, true, plan{check: true, diskName: "disk.qcow2"}},
		{contract.FormatVMDK, true, plan{convertTo: contract.FormatQcow2, diskName: "disk.qcow2"}},
		{contract.FormatVDI, true, plan{convertTo: contract.FormatQcow2, diskName: "disk.qcow2"}},
	}
	for _, tc := range cases {
		if got := planFor(tc.format, tc.toRegistry); got != tc.want {
			t.Errorf("planFor(%s, registry=%v) = %+v, want %+v", tc.format, tc.toRegistry, got, tc.want)
		}
	}
}

// bytesSource is a source in memory.
type bytesSource struct {
	data []byte
	size int64
}

func (b bytesSource) Open(context.Context) (source.Stream, error) {
	return source.Stream{ReadCloser: io.NopCloser(bytes.NewReader(b.data)), Size: b.size}, nil
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// testImport is an import of src without a destination, expecting the sha256 sum (none: "") and
// a clock that stands still.
func testImport(t *testing.T, src Source, sha string) *Import {
	t.Helper()
	sums, err := checksum.New(map[string]string{"sha256": sha})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	return &Import{
		Source: src, Checksum: sums, ScratchDir: t.TempDir(),
		Progress: progress.New(func() time.Time { return now }), Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// The streamed path into a file (raw and ISO need no qemu-img).
func TestRunToFile(t *testing.T) {
	raw := append(bytes.Repeat([]byte{0xeb, 0x3c, 0x90, 0}, 128<<10), make([]byte, 1<<20)...) // 1.5 MiB
	iso := make([]byte, 64<<10)
	copy(iso[0x8001:], "CD001")
	cases := []struct {
		name     string
		data     []byte
		size     int64
		sha      string
		capacity int64
		want     contract.Result
		reason   contract.Reason
	}{
		{name: "raw", data: raw, size: int64(len(raw)), sha: sum(raw),
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatRaw, UnpackedSize: int64(len(raw)), SourceSize: int64(len(raw))}},
		{name: "gzipped raw, size unknown", data: gz(raw), size: -1, sha: sum(gz(raw)),
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatRaw, UnpackedSize: int64(len(raw)), SourceSize: int64(len(gz(raw)))}},
		{name: "iso", data: iso, size: int64(len(iso)),
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatISO, CDROM: true, UnpackedSize: int64(len(iso)), SourceSize: int64(len(iso))}},
		{name: "checksum mismatch", data: raw, size: int64(len(raw)), sha: sum(iso), reason: contract.ReasonChecksumMismatch},
		{name: "too large, known from Content-Length", data: raw, size: int64(len(raw)), capacity: 1 << 20, reason: contract.ReasonTooLarge},
		{name: "too large, gzipped", data: gz(raw), size: -1, capacity: 1 << 20, reason: contract.ReasonTooLarge},
		{name: "truncated raw", data: raw[:1000], size: 1000, reason: contract.ReasonNotDiskImage},
		{name: "text", data: []byte("404 page not found\n"), size: 19, reason: contract.ReasonNotDiskImage},
		{name: "gzip in gzip", data: gz(gz(raw)), size: -1, reason: contract.ReasonUnsupportedFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "disk.img")
			file, err := destination.OpenFile(path, tc.capacity)
			if err != nil {
				t.Fatal(err)
			}
			im := testImport(t, bytesSource{tc.data, tc.size}, tc.sha)
			im.File = file
			res, err := im.Run(context.Background())
			if tc.reason != "" {
				if contract.ReasonOf(err) != tc.reason {
					t.Fatalf("Run = %+v, %v; want %s", res, err, tc.reason)
				}
				if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
					t.Fatalf("a failed import left %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			res.StoredSize = 0 // the file system's
			if res != tc.want {
				t.Fatalf("result %+v, want %+v", res, tc.want)
			}
			got, _ := os.ReadFile(path)
			want := raw
			if tc.want.CDROM {
				want = iso
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the disk differs from the source")
			}
			if s := im.Progress.Snapshot(); s.Ratio != 1 {
				t.Fatalf("progress %+v at the end", s)
			}
		})
	}
}

// Inspect tells the format and unpacked size and writes nothing.
func TestRunInspect(t *testing.T) {
	raw := append(bytes.Repeat([]byte{0xeb, 0x3c, 0x90, 0}, 128<<10), make([]byte, 1<<20)...) // 1.5 MiB
	iso := make([]byte, 64<<10)
	copy(iso[0x8001:], "CD001")
	qcow2 := make([]byte, 512)
	copy(qcow2, "QFI\xfb\x00\x00\x00\x03")
	qcow2[24+4] = 0x40 // virtual size 0x40000000: 1 GiB
	cases := []struct {
		name   string
		data   []byte
		size   int64
		want   contract.Result
		reason contract.Reason
	}{
		{name: "raw: its length as served", data: raw[:4096], size: int64(len(raw)),
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatRaw, UnpackedSize: int64(len(raw))}},
		{name: "gzipped raw: read through", data: gz(raw), size: -1,
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatRaw, UnpackedSize: int64(len(raw))}},
		{name: "qcow2: the header's size", data: qcow2, size: 1 << 40,
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatQcow2, UnpackedSize: 1 << 30}},
		{name: "iso", data: iso, size: int64(len(iso)),
			want: contract.Result{Reason: contract.ReasonCompleted, Format: contract.FormatISO, CDROM: true, UnpackedSize: int64(len(iso))}},
		{name: "gzipped truncated raw", data: gz(raw[:1000]), size: -1, reason: contract.ReasonNotDiskImage},
		{name: "text", data: []byte("404 page not found\n"), size: 19, reason: contract.ReasonNotDiskImage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			im := testImport(t, bytesSource{tc.data, tc.size}, "")
			im.Inspect = true
			res, err := im.Run(context.Background())
			if tc.reason != "" {
				if contract.ReasonOf(err) != tc.reason {
					t.Fatalf("Run = %+v, %v; want %s", res, err, tc.reason)
				}
				return
			}
			res.SourceSize = 0
			if err != nil || res != tc.want {
				t.Fatalf("Run = %+v, %v; want %+v", res, err, tc.want)
			}
		})
	}
}
