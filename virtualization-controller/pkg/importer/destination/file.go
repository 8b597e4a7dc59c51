// Package destination stores an imported disk: as a raw disk in a file or block device (a PVC),
// or as a container-disk image pushed to DVCR. A failed import leaves nothing that looks done:
// no file at the destination's path, no tag in the registry.
package destination

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// PartialSuffix marks a file an import is still writing; it is renamed into place when done.
const PartialSuffix = ".importing"

// File is a raw disk at Path: a regular file (created) or a block device (written in place).
type File struct {
	Path string
	// Capacity is the most bytes the disk may have: the limit given, else the block device's
	// size; 0 means no limit. A file is made that large (Commit).
	Capacity int64
	block    bool
}

// OpenFile looks at path: a block device's size caps capacity (0: the device's size).
func OpenFile(path string, capacity int64) (*File, error) {
	f := &File{Path: path, Capacity: capacity}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, contract.Errorf(contract.ReasonDestinationFailed, "destination %s: %w", path, err)
	case st.Mode()&os.ModeDevice == 0:
		return f, nil // a file left by an earlier attempt: replaced
	}
	f.block = true
	size, err := deviceSize(path)
	if err != nil {
		return nil, contract.Errorf(contract.ReasonDestinationFailed, "destination %s: %w", path, err)
	}
	if f.Capacity == 0 || f.Capacity > size {
		f.Capacity = size
	}
	return f, nil
}

func deviceSize(path string) (int64, error) {
	d, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return d.Seek(0, io.SeekEnd)
}

// Block says the destination is a block device.
func (f *File) Block() bool { return f.block }

// Fits refuses a disk of virtual size n that exceeds the capacity.
func (f *File) Fits(n int64) error {
	if f.Capacity > 0 && n > f.Capacity {
		return contract.Errorf(contract.ReasonTooLarge, "the disk's unpacked size is %d bytes, larger than the destination's %d: make the disk at least %d bytes", n, f.Capacity, n)
	}
	return nil
}

// WritePath is where the disk is written until Commit: the device itself, or the file's partial name.
func (f *File) WritePath() string {
	if f.block {
		return f.Path
	}
	return f.Path + PartialSuffix
}

// chunk is the unit of zero detection: an all-zero chunk is skipped in a fresh file (left sparse).
const chunk = 1 << 20

// WriteRaw streams a raw disk into the destination and returns its size. Zero chunks stay holes
// in a file; a block device gets every byte. Exceeding the capacity fails with ReasonTooLarge.
func (f *File) WriteRaw(r io.Reader) (int64, error) {
	flags := os.O_WRONLY
	if !f.block {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	out, err := os.OpenFile(f.WritePath(), flags, 0o660)
	if err != nil {
		return 0, contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", err)
	}
	n, werr := copySparse(out, r, !f.block, f.Capacity)
	if werr == nil && !f.block {
		if err := out.Truncate(n); err != nil { // trailing holes
			werr = contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", err)
		}
	}
	if werr == nil {
		if err := out.Sync(); err != nil {
			werr = contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", err)
		}
	}
	if err := out.Close(); err != nil && werr == nil {
		werr = contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", err)
	}
	return n, werr
}

var zeros = make([]byte, chunk)

// copySparse copies r to out from offset 0; with skipZeros an all-zero chunk is left a hole.
// More than capacity bytes (when not 0) fail with ReasonTooLarge.
func copySparse(out *os.File, r io.Reader, skipZeros bool, capacity int64) (int64, error) {
	buf := make([]byte, chunk)
	var n int64
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			if capacity > 0 && n+int64(m) > capacity {
				return n, contract.Errorf(contract.ReasonTooLarge, "the disk is larger than the destination's %d bytes (more arrived): make the disk larger", capacity)
			}
			if !skipZeros || !bytes.Equal(buf[:m], zeros[:m]) {
				if _, werr := out.WriteAt(buf[:m], n); werr != nil {
					return n, contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", werr)
				}
			}
			n += int64(m)
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return n, nil
		default:
			return n, err
		}
	}
}

// Stage writes r into a new sparse file at path (zero chunks left holes, which qemu-img skips),
// for images that qemu-img reads or that are pushed to DVCR.
func Stage(path string, r io.Reader) (int64, error) {
	out, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("scratch space: %w", err)
	}
	n, err := copySparse(out, r, true, 0)
	if err == nil {
		err = out.Truncate(n)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	var reasoned *contract.Error
	if err != nil && !errors.As(err, &reasoned) {
		err = contract.Errorf(contract.ReasonDestinationFailed, "staging the disk in the scratch space: %w", err)
	}
	return n, err
}

// Commit puts a written file in place.
func (f *File) Commit() error {
	if f.block {
		return nil
	}
	// The disk is the capacity asked for: a smaller image grows into it (a sparse tail), as a
	// claim's disk.img is as large as its disk, not as the image it was made from.
	if st, err := os.Stat(f.WritePath()); err != nil {
		return contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", err)
	} else if st.Size() < f.Capacity {
		if err := os.Truncate(f.WritePath(), f.Capacity); err != nil {
			return contract.Errorf(contract.ReasonDestinationFailed, "destination: grow the disk to %d bytes: %w", f.Capacity, err)
		}
	}
	if err := os.Rename(f.WritePath(), f.Path); err != nil {
		return contract.Errorf(contract.ReasonDestinationFailed, "destination: %w", err)
	}
	return nil
}

// Abort undoes a failed write: the partial file goes; a block device's first MiB is zeroed, so
// that what is left is never taken for a disk.
func (f *File) Abort() error {
	if !f.block {
		if err := os.Remove(f.WritePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the partial file: %w", err)
		}
		return nil
	}
	out, err := os.OpenFile(f.Path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("wiping the block device: %w", err)
	}
	defer out.Close()
	n := min(int64(chunk), f.Capacity)
	if _, err := out.WriteAt(zeros[:n], 0); err != nil {
		return fmt.Errorf("wiping the block device: %w", err)
	}
	return out.Sync()
}

// Stored is the bytes the disk occupies: allocated blocks of a file, the device's size.
func (f *File) Stored() (int64, error) {
	if f.block {
		return f.Capacity, nil
	}
	var st unix.Stat_t
	if err := unix.Stat(f.Path, &st); err != nil {
		return 0, fmt.Errorf("destination: %w", err)
	}
	return st.Blocks * 512, nil
}
