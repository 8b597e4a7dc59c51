// Package detect tells from the first bytes of a stream what it holds: a compression (gzip, xz)
// to undo first, or a disk format (qcow2, vmdk, vdi, ISO 9660, raw), with the virtual size where
// the header says it; and refuses what is not a disk image (text, archives, executables). It reads
// nothing itself: the caller peeks HeaderSize bytes (fewer at the end of a short stream).
package detect

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// HeaderSize is the most Detect looks at: an ISO 9660 volume descriptor starts at 32769.
const HeaderSize = isoMagicOffset + len(isoMagic)

// Compression of a stream.
type Compression string

const (
	None Compression = ""
	Gzip Compression = "gzip"
	XZ   Compression = "xz"
)

// Info is what a header says.
type Info struct {
	// Compression is set when the stream is compressed; Format is then empty: detect again on the
	// decompressed stream.
	Compression Compression
	// Format is one of contract.Format*.
	Format string
	// VirtualSize is the disk's size as a VM sees it, from the header (qcow2, vmdk); 0 when the
	// header does not say (raw, ISO, vdi: the stream's length, or qemu-img, tells).
	VirtualSize int64
}

const (
	isoMagicOffset = 0x8001
	isoMagic       = "CD001"
	qcow2Magic     = "QFI\xfb"
	vmdkMagic      = "KDMV"
	vdiMagicOffset = 0x40
	vdiMagic       = "\x7f\x10\xda\xbe"
	sectorSize     = 512
)

type signature struct {
	offset int
	magic  string
	what   string
}

// Compressions the importer does not undo, and files that are no disk images: refused by name.
var (
	unsupportedCompressions = []signature{
		{0, "BZh", "bzip2"},
		{0, "\x28\xb5\x2f\xfd", "zstd"},
		{0, "\x04\x22\x4d\x18", "lz4"},
	}
	notDisks = []signature{
		{0, "PK\x03\x04", "a zip archive"},
		{0, "7z\xbc\xaf\x27\x1c", "a 7z archive"},
		{0, "Rar!\x1a\x07", "a rar archive"},
		{257, "ustar", "a tar archive"},
		{0, "%PDF-", "a PDF document"},
		{0, "\x7fELF", "an ELF executable"},
		{0, "\x89PNG\r\n\x1a\n", "a PNG image"},
		{0, "\xff\xd8\xff", "a JPEG image"},
		{0, "# Disk DescriptorFile", "a VMDK descriptor without its extents (upload a monolithic sparse or stream-optimized VMDK)"},
		{0, "conectix", "a VHD (not supported: convert it to qcow2 or raw)"},
		{0, "vhdxfile", "a VHDX (not supported: convert it to qcow2 or raw)"},
	}
)

// Detect reads a header: the first HeaderSize bytes of a stream, or all of a shorter one.
func Detect(header []byte) (Info, error) {
	if len(header) == 0 {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is empty")
	}
	switch {
	case bytes.HasPrefix(header, []byte{0x1f, 0x8b}):
		return Info{Compression: Gzip}, nil
	case bytes.HasPrefix(header, []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}):
		return Info{Compression: XZ}, nil
	}
	for _, s := range unsupportedCompressions {
		if s.match(header) {
			return Info{}, contract.Errorf(contract.ReasonUnsupportedFormat, "the source is %s-compressed; only gzip and xz are supported", s.what)
		}
	}
	switch {
	case bytes.HasPrefix(header, []byte(qcow2Magic)):
		return qcow2(header)
	case bytes.HasPrefix(header, []byte(vmdkMagic)):
		return vmdk(header)
	case (signature{vdiMagicOffset, vdiMagic, ""}).match(header):
		return Info{Format: contract.FormatVDI}, nil
	case (signature{isoMagicOffset, isoMagic, ""}).match(header):
		return Info{Format: contract.FormatISO}, nil
	}
	for _, s := range notDisks {
		if s.match(header) {
			return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is %s, not a disk image", s.what)
		}
	}
	if isText(header) {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is text (%q...), not a disk image: check the URL", preview(header))
	}
	return Info{Format: contract.FormatRaw}, nil
}

// CheckRawSize refuses a raw image whose length is no whole number of 512-byte sectors: a
// truncated download or a file that is no disk.
func CheckRawSize(n int64) error {
	if n%sectorSize != 0 {
		return contract.Errorf(contract.ReasonNotDiskImage, "the source is %d bytes, not a whole number of %d-byte sectors: not a raw disk image (truncated?)", n, sectorSize)
	}
	return nil
}

func (s signature) match(b []byte) bool {
	return len(b) >= s.offset+len(s.magic) && string(b[s.offset:s.offset+len(s.magic)]) == s.magic
}

// qcow2 header (big endian): magic, version u32 @4, backing_file_offset u64 @8, size u64 @24.
func qcow2(h []byte) (Info, error) {
	if len(h) < 32 {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is a truncated qcow2 header (%d bytes)", len(h))
	}
	if v := binary.BigEndian.Uint32(h[4:]); v != 2 && v != 3 {
		return Info{}, contract.Errorf(contract.ReasonUnsupportedFormat, "the source is qcow2 version %d; only versions 2 and 3 are supported", v)
	}
	if binary.BigEndian.Uint64(h[8:]) != 0 {
		return Info{}, contract.Errorf(contract.ReasonUnsupportedFormat, "the source is a qcow2 image with a backing file: only self-contained images are supported (qemu-img convert it first)")
	}
	size := binary.BigEndian.Uint64(h[24:])
	if size == 0 || size > 1<<62 {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is a qcow2 image of virtual size %d", size)
	}
	return Info{Format: contract.FormatQcow2, VirtualSize: int64(size)}, nil
}

// vmdk sparse extent header (little endian): magic, version u32 @4, flags u32 @8, capacity u64 @12
// in sectors.
func vmdk(h []byte) (Info, error) {
	if len(h) < 20 {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is a truncated vmdk header (%d bytes)", len(h))
	}
	sectors := binary.LittleEndian.Uint64(h[12:])
	if sectors == 0 || sectors > 1<<53 {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source is a vmdk of %d sectors", sectors)
	}
	return Info{Format: contract.FormatVMDK, VirtualSize: int64(sectors) * sectorSize}, nil
}

// isText: valid UTF-8 with no NUL and no control characters but whitespace. Every disk format
// and every raw disk (boot sectors, partition tables, zeroed space) has some.
func isText(b []byte) bool {
	if len(b) > 4096 {
		b = b[:4096]
	}
	// A multi-byte character cut at the end is still text.
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f' {
			return false
		}
	}
	return true
}

func preview(b []byte) string {
	const n = 40
	r := []rune(string(b[:min(len(b), 4*n)]))
	return string(r[:min(len(r), n)])
}
