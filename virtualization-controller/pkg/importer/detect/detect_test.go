package detect

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func qcow2Header(version uint32, backing, size uint64) []byte {
	h := make([]byte, 512)
	copy(h, qcow2Magic)
	binary.BigEndian.PutUint32(h[4:], version)
	binary.BigEndian.PutUint64(h[8:], backing)
	binary.BigEndian.PutUint64(h[24:], size)
	return h
}

func vmdkHeader(sectors uint64) []byte {
	h := make([]byte, 512)
	copy(h, vmdkMagic)
	binary.LittleEndian.PutUint32(h[4:], 1)
	binary.LittleEndian.PutUint64(h[12:], sectors)
	return h
}

func at(offset int, magic string, size int) []byte {
	h := make([]byte, size)
	copy(h[offset:], magic)
	return h
}

func mbr() []byte {
	h := make([]byte, 4096)
	copy(h, "\xeb\x63\x90\x10\x8e\xd0\xbc\x00\xb0\xb8\x00\x00")
	h[510], h[511] = 0x55, 0xaa
	return h
}

func TestDetect(t *testing.T) {
	cases := []struct {
		name   string
		header []byte
		want   Info
		reason contract.Reason // non-empty: an error with this reason, its message containing msg
		msg    string
	}{
		{name: "gzip", header: []byte{0x1f, 0x8b, 8, 0, 0}, want: Info{Compression: Gzip}},
		{name: "xz", header: []byte("\xfd7zXZ\x00\x00\x04"), want: Info{Compression: XZ}},
		{name: "bzip2", header: []byte("BZh91AY&SY"), reason: contract.ReasonUnsupportedFormat, msg: "bzip2"},
		{name: "zstd", header: []byte("\x28\xb5\x2f\xfd\x00"), reason: contract.ReasonUnsupportedFormat, msg: "zstd"},
		{name: "qcow2 v3", header: qcow2Header(3, 0, 1<<30), want: Info{Format: contract.FormatQcow2, VirtualSize: 1 << 30}},
		{name: "qcow2 v2", header: qcow2Header(2, 0, 64<<20), want: Info{Format: contract.FormatQcow2, VirtualSize: 64 << 20}},
		{name: "qcow2 backing file", header: qcow2Header(3, 0x1000, 1<<30), reason: contract.ReasonUnsupportedFormat, msg: "backing file"},
		{name: "qcow2 v4", header: qcow2Header(4, 0, 1<<30), reason: contract.ReasonUnsupportedFormat, msg: "version 4"},
		{name: "qcow2 size 0", header: qcow2Header(3, 0, 0), reason: contract.ReasonNotDiskImage},
		{name: "qcow2 truncated", header: []byte(qcow2Magic + "\x00\x00\x00\x03"), reason: contract.ReasonNotDiskImage, msg: "truncated"},
		{name: "vmdk", header: vmdkHeader(2048), want: Info{Format: contract.FormatVMDK, VirtualSize: 1 << 20}},
		{name: "vmdk descriptor", header: []byte("# Disk DescriptorFile\nversion=1\n"), reason: contract.ReasonNotDiskImage, msg: "descriptor"},
		{name: "vdi", header: at(vdiMagicOffset, vdiMagic, 512), want: Info{Format: contract.FormatVDI}},
		{name: "iso", header: at(isoMagicOffset, isoMagic, HeaderSize), want: Info{Format: contract.FormatISO}},
		{name: "iso cut short", header: at(isoMagicOffset, "CD0", isoMagicOffset+3), want: Info{Format: contract.FormatRaw}},
		{name: "raw mbr", header: mbr(), want: Info{Format: contract.FormatRaw}},
		{name: "raw zeros", header: make([]byte, HeaderSize), want: Info{Format: contract.FormatRaw}},
		{name: "empty", header: nil, reason: contract.ReasonNotDiskImage, msg: "empty"},
		{name: "html", header: []byte("<!DOCTYPE html>\n<html><body>Not Found</body></html>\n"), reason: contract.ReasonNotDiskImage, msg: "text"},
		{name: "utf-8 text cut mid-rune", header: []byte("привет мир"[:5]), reason: contract.ReasonNotDiskImage, msg: "text"},
		{name: "zip", header: []byte("PK\x03\x04\x14\x00"), reason: contract.ReasonNotDiskImage, msg: "zip"},
		{name: "tar", header: at(257, "ustar", 512), reason: contract.ReasonNotDiskImage, msg: "tar"},
		{name: "elf", header: []byte("\x7fELF\x02\x01\x01"), reason: contract.ReasonNotDiskImage, msg: "ELF"},
		{name: "vhdx", header: []byte("vhdxfile\x00\x00"), reason: contract.ReasonNotDiskImage, msg: "VHDX"},
		{name: "one binary byte", header: []byte{0xff}, want: Info{Format: contract.FormatRaw}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.header)
			if tc.reason != "" {
				if err == nil {
					t.Fatalf("Detect = %+v, want an error %s", got, tc.reason)
				}
				if r := contract.ReasonOf(err); r != tc.reason {
					t.Fatalf("reason %s (%v), want %s", r, err, tc.reason)
				}
				if !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("error %q does not mention %q", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Detect = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCheckRawSize(t *testing.T) {
	for _, tc := range []struct {
		n  int64
		ok bool
	}{{0, true}, {512, true}, {1 << 30, true}, {511, false}, {1<<30 + 1, false}} {
		if err := CheckRawSize(tc.n); (err == nil) != tc.ok {
			t.Errorf("CheckRawSize(%d) = %v, want ok=%v", tc.n, err, tc.ok)
		} else if err != nil && contract.ReasonOf(err) != contract.ReasonNotDiskImage {
			t.Errorf("CheckRawSize(%d): reason %s", tc.n, contract.ReasonOf(err))
		}
	}
}

func FuzzDetect(f *testing.F) {
	for _, seed := range [][]byte{
		qcow2Header(3, 0, 1<<30), vmdkHeader(2048), at(vdiMagicOffset, vdiMagic, 512),
		at(isoMagicOffset, isoMagic, HeaderSize), mbr(), []byte("<html>"), {0x1f, 0x8b}, nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		info, err := Detect(header)
		if err != nil {
			if r := contract.ReasonOf(err); r != contract.ReasonNotDiskImage && r != contract.ReasonUnsupportedFormat {
				t.Fatalf("error without a reason of the header: %v (%s)", err, r)
			}
			return
		}
		if (info.Compression == None) == (info.Format == "") {
			t.Fatalf("want exactly one of compression and format: %+v", info)
		}
		if info.VirtualSize < 0 {
			t.Fatalf("negative virtual size: %+v", info)
		}
		if info.Format == contract.FormatQcow2 && !strings.HasPrefix(string(header), qcow2Magic) {
			t.Fatalf("qcow2 without its magic: %q", header[:min(len(header), 8)])
		}
	})
}
