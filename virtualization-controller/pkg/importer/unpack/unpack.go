// Package unpack undoes a stream's compression (gzip, xz) as it is read.
package unpack

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/ulikunitz/xz"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/detect"
)

// Reader returns the decompressed stream of r. Corrupt data surfaces from Read as a
// ReasonNotDiskImage error.
func Reader(c detect.Compression, r io.Reader) (io.Reader, error) {
	switch c {
	case detect.None:
		return r, nil
	case detect.Gzip:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, corrupt(c, err)
		}
		return &reader{c: c, r: z}, nil
	case detect.XZ:
		z, err := xz.NewReader(r)
		if err != nil {
			return nil, corrupt(c, err)
		}
		return &reader{c: c, r: z}, nil
	}
	return nil, fmt.Errorf("unpack: unknown compression %q", c)
}

type reader struct {
	c detect.Compression
	r io.Reader
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		var reasoned *contract.Error
		if errors.As(err, &reasoned) {
			return n, err // the source's own failure (network), passed through
		}
		return n, corrupt(r.c, err)
	}
	return n, err
}

func corrupt(c detect.Compression, err error) error {
	return contract.Errorf(contract.ReasonNotDiskImage, "the source's %s data is corrupt: %w", c, err)
}
