package source

import (
	"context"
	"io"
	"os"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// File reads a disk file or block device the importer's Pod mounts: another disk's claim, for a
// disk cloned from a disk. Its size is where it ends.
type File struct {
	Path string
}

// Open opens the file at its start.
func (f *File) Open(context.Context) (Stream, error) {
	file, err := os.Open(f.Path)
	if err != nil {
		return Stream{}, contract.Errorf(contract.ReasonSourceNotFound, "the source disk cannot be read: %w", err)
	}
	size, err := file.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = file.Seek(0, io.SeekStart)
	}
	if err != nil {
		file.Close()
		return Stream{}, contract.Errorf(contract.ReasonSourceFailed, "the source disk's size: %w", err)
	}
	return Stream{ReadCloser: file, Size: size}, nil
}
