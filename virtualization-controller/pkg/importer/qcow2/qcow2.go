// Package qcow2 writes a sparse raw disk file as a qcow2 image, as a stream: the layout of the
// tables is computed from the file's data extents (SEEK_DATA/SEEK_HOLE) before anything is
// written, so the image goes out front to back in one pass over the data, with no qcow2 file
// written first. What qemu-img convert would write to disk and then be read again by the push
// goes straight into it (docs/importer.md, "Performance").
//
// The image is qcow2 version 3 with 64 KiB clusters and 16-bit refcounts: the header, the L1
// table, the refcount table, the refcount blocks, the L2 tables of the L1 entries that have data,
// then the data clusters in the guest's order. A cluster of the guest that holds any data is
// stored; the rest are unallocated (read as zeros). Every cluster of the file is referenced once.
package qcow2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

const (
	clusterBits  = 16
	clusterSize  = 1 << clusterBits
	l2Entries    = clusterSize / 8 // guest clusters an L2 table maps
	refcountBits = 16
	rbEntries    = clusterSize * 8 / refcountBits // clusters a refcount block counts
	headerLength = 104
	flagCopied   = uint64(1) << 63 // the cluster is referenced once: it may be written in place
	magic        = 0x514649fb      // "QFI\xfb"
)

// span is a run of guest clusters [first, end) that hold data.
type span struct{ first, end int64 }

// Image is the qcow2 image of a raw disk file.
type Image struct {
	path    string
	virtual int64
	spans   []span
	data    int64 // clusters of data
	// Where each part starts, in clusters, and how many clusters it has.
	l1Clusters, rtClusters, rbClusters, l2Clusters int64
	l1Entries                                      int64
}

// Open lays out the image of the raw disk at path (its size is the virtual size).
func Open(path string) (*Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	spans, err := dataSpans(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("qcow2: the data of %s: %w", path, err)
	}
	return layout(path, st.Size(), spans), nil
}

// dataSpans are the clusters of f (size bytes) that hold data, in order, merged.
func dataSpans(f *os.File, size int64) ([]span, error) {
	var out []span
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole up to the end
		}
		if err != nil {
			return nil, fmt.Errorf("SEEK_DATA: %w", err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("SEEK_HOLE: %w", err)
		}
		s := span{first: start / clusterSize, end: (end + clusterSize - 1) / clusterSize}
		if n := len(out); n > 0 && out[n-1].end >= s.first {
			out[n-1].end = max(out[n-1].end, s.end)
		} else {
			out = append(out, s)
		}
		off = end
	}
	return out, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// layout places the tables of a disk of virtual bytes whose data is in spans.
func layout(path string, virtual int64, spans []span) *Image {
	im := &Image{path: path, virtual: virtual, spans: spans}
	for _, s := range spans {
		im.data += s.end - s.first
	}
	im.l1Entries = max(ceilDiv(ceilDiv(virtual, clusterSize), l2Entries), 1)
	im.l1Clusters = ceilDiv(im.l1Entries*8, clusterSize)
	im.forEachL2(func(int64) { im.l2Clusters++ })
	// The refcount blocks count every cluster, themselves and the table that points to them.
	im.rbClusters, im.rtClusters = 1, 1
	for {
		rb := ceilDiv(im.clusters(), rbEntries)
		rt := ceilDiv(rb*8, clusterSize)
		if rb == im.rbClusters && rt == im.rtClusters {
			break
		}
		im.rbClusters, im.rtClusters = rb, rt
	}
	return im
}

// forEachL2 calls fn with each L1 index that maps data, in order.
func (im *Image) forEachL2(fn func(l1 int64)) {
	last := int64(-1)
	for _, s := range im.spans {
		for i := max(s.first/l2Entries, last+1); i <= (s.end-1)/l2Entries; i++ {
			fn(i)
			last = i
		}
	}
}

func (im *Image) clusters() int64 {
	return 1 + im.l1Clusters + im.rtClusters + im.rbClusters + im.l2Clusters + im.data
}

// The parts' offsets, in bytes.
func (im *Image) l1Offset() int64   { return clusterSize }
func (im *Image) rtOffset() int64   { return im.l1Offset() + im.l1Clusters*clusterSize }
func (im *Image) rbOffset() int64   { return im.rtOffset() + im.rtClusters*clusterSize }
func (im *Image) l2Offset() int64   { return im.rbOffset() + im.rbClusters*clusterSize }
func (im *Image) dataOffset() int64 { return im.l2Offset() + im.l2Clusters*clusterSize }

// Size is the image's size in bytes.
func (im *Image) Size() int64 { return im.clusters() * clusterSize }

// VirtualSize is the disk's size.
func (im *Image) VirtualSize() int64 { return im.virtual }

// WriteTo writes the image to w, reading the raw disk's data as it goes.
func (im *Image) WriteTo(w io.Writer) (int64, error) {
	f, err := os.Open(im.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cw := &clusterWriter{w: w, buf: make([]byte, clusterSize)}
	im.header(cw.next())
	im.l1(cw)
	im.refcounts(cw)
	im.l2(cw)
	if cw.err == nil {
		im.copyData(f, cw)
	}
	return cw.n, cw.err
}

// clusterWriter hands out one zeroed cluster buffer at a time and writes it when the next is
// asked for (or on flush).
type clusterWriter struct {
	w       io.Writer
	buf     []byte
	pending bool
	n       int64
	err     error
}

func (c *clusterWriter) flush() {
	if c.pending && c.err == nil {
		var n int
		n, c.err = c.w.Write(c.buf)
		c.n += int64(n)
	}
	c.pending = false
}

func (c *clusterWriter) next() []byte {
	c.flush()
	clear(c.buf)
	c.pending = true
	return c.buf
}

func (im *Image) header(b []byte) {
	be := binary.BigEndian
	be.PutUint32(b[0:], magic)
	be.PutUint32(b[4:], 3)
	be.PutUint32(b[20:], clusterBits)
	be.PutUint64(b[24:], uint64(im.virtual))
	be.PutUint32(b[36:], uint32(im.l1Entries))
	be.PutUint64(b[40:], uint64(im.l1Offset()))
	be.PutUint64(b[48:], uint64(im.rtOffset()))
	be.PutUint32(b[56:], uint32(im.rtClusters))
	be.PutUint32(b[96:], 4) // refcount_order: 16-bit refcounts
	be.PutUint32(b[100:], headerLength)
	// The header extensions end at once (an end marker of zeros: already there).
}

// entries writes count 8-byte big-endian entries, entry(i) each, over whole clusters.
func entries(cw *clusterWriter, clusters, count int64, entry func(i int64) uint64) {
	var b []byte
	for i := int64(0); i < clusters*clusterSize/8; i++ {
		if i%(clusterSize/8) == 0 {
			b = cw.next()
		}
		if i < count {
			binary.BigEndian.PutUint64(b[(i%(clusterSize/8))*8:], entry(i))
		}
	}
}

func (im *Image) l1(cw *clusterWriter) {
	table := map[int64]uint64{}
	n := int64(0)
	im.forEachL2(func(l1 int64) {
		table[l1] = uint64(im.l2Offset()+n*clusterSize) | flagCopied
		n++
	})
	entries(cw, im.l1Clusters, im.l1Entries, func(i int64) uint64 { return table[i] })
}

func (im *Image) refcounts(cw *clusterWriter) {
	entries(cw, im.rtClusters, im.rbClusters, func(i int64) uint64 { return uint64(im.rbOffset() + i*clusterSize) })
	used := im.clusters()
	for blk := int64(0); blk < im.rbClusters; blk++ {
		b := cw.next()
		for j := int64(0); j < rbEntries && blk*rbEntries+j < used; j++ {
			binary.BigEndian.PutUint16(b[j*2:], 1)
		}
	}
}

func (im *Image) l2(cw *clusterWriter) {
	// Data clusters are stored in the guest's order: the k-th one at dataOffset + k clusters.
	k := int64(0)
	si := 0
	im.forEachL2(func(l1 int64) {
		b := cw.next()
		lo, hi := l1*l2Entries, (l1+1)*l2Entries
		for si < len(im.spans) && im.spans[si].end <= lo {
			si++
		}
		for _, s := range im.spans[si:] {
			if s.first >= hi {
				break
			}
			for g := max(s.first, lo); g < min(s.end, hi); g++ {
				binary.BigEndian.PutUint64(b[(g-lo)*8:], uint64(im.dataOffset()+k*clusterSize)|flagCopied)
				k++
			}
		}
	})
	cw.flush()
}

// copyData writes the data clusters, read from the raw disk (a last cluster past its end is
// padded with zeros).
func (im *Image) copyData(f *os.File, cw *clusterWriter) {
	for _, s := range im.spans {
		for g := s.first; g < s.end && cw.err == nil; g++ {
			b := cw.next()
			if _, err := f.ReadAt(b, g*clusterSize); err != nil && !errors.Is(err, io.EOF) {
				cw.err = fmt.Errorf("qcow2: reading %s: %w", im.path, err)
				return
			}
		}
	}
	cw.flush()
}

// Open reads the image from its start, as it is generated.
func (im *Image) Open() (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() {
		_, err := im.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	return pr, nil
}
