// Package importer runs one import: it reads a source, detects and unpacks the disk in it,
// verifies its checksum while it streams, converts it where the destination needs another format,
// and stores it in a file or block device (a PVC) or in DVCR. Its parts are the packages below;
// cmd/importer wires them from flags (contract.Flag*).
package importer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/d8virt/virtualization-controller/pkg/importer/checksum"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importer/convert"
	"github.com/d8virt/virtualization-controller/pkg/importer/destination"
	"github.com/d8virt/virtualization-controller/pkg/importer/detect"
	"github.com/d8virt/virtualization-controller/pkg/importer/progress"
	"github.com/d8virt/virtualization-controller/pkg/importer/qcow2"
	"github.com/d8virt/virtualization-controller/pkg/importer/source"
	"github.com/d8virt/virtualization-controller/pkg/importer/unpack"
)

// Source is where a disk comes from (source.HTTP, source.Registry).
type Source interface {
	Open(ctx context.Context) (source.Stream, error)
}

// Import is one import. Exactly one of File and Registry is set, or neither with Inspect.
type Import struct {
	// Inspect learns the disk's format and unpacked size only (contract.FlagInspect).
	Inspect  bool
	Source   Source
	Checksum *checksum.Verifier
	File     *destination.File
	Registry *destination.Registry
	// ScratchDir holds the images staged for qemu-img (and for a push to DVCR).
	ScratchDir string
	QemuImg    convert.QemuImg
	Progress   *progress.Progress
	Log        *slog.Logger
	Now        func() time.Time
}

// plan is what an import does with a disk of one format for one kind of destination.
type plan struct {
	stream    bool   // write the raw data straight into the destination file as it arrives
	check     bool   // qemu-img check the staged image (qcow2)
	convertTo string // the staged image is converted to this format first; "" keeps it as it is
	diskName  string // DVCR: the file under disk/
}

// planFor decides: a PVC holds a raw disk (KubeVirt's disk.img), DVCR holds qcow2 (compact, what
// containerDisk boots) or the ISO as it is.
func planFor(format string, toRegistry bool) plan {
	switch {
	case !toRegistry && (format == contract.FormatRaw || format == contract.FormatISO):
		return plan{stream: true}
	case !toRegistry:
		return plan{check: format == contract.FormatQcow2, convertTo: contract.FormatRaw}
	case format == contract.FormatISO:
		return plan{diskName: "disk.iso"}
	case format == contract.FormatQcow2:
		return plan{check: true, diskName: "disk.qcow2"}
	}
	return plan{convertTo: contract.FormatQcow2, diskName: "disk.qcow2"}
}

// Run imports. On failure nothing is left at the destination, and the error has a Reason.
func (im *Import) Run(ctx context.Context) (contract.Result, error) {
	s, err := im.Source.Open(ctx)
	if err != nil {
		return contract.Result{}, err
	}
	defer s.Close()
	if s.Size >= 0 {
		im.Progress.SetTotal(s.Size)
	}
	// Everything read from the source is hashed; the disk is what remains after unpacking.
	whole := io.TeeReader(im.Progress.Reader(s), im.Checksum)
	disk, info, compressed, err := open(whole)
	if err != nil {
		return contract.Result{}, err
	}
	im.Log.Info("detected", "format", info.Format, "compressed", compressed, "virtualSize", info.VirtualSize, "sourceSize", s.Size)
	if im.Inspect {
		return im.inspect(disk, info, compressed, s.Size)
	}
	if im.File != nil {
		// The header's size, or an uncompressed raw source's length, tells before anything is written.
		known := info.VirtualSize
		if known == 0 && !compressed {
			known = s.Size
		}
		if err := im.File.Fits(known); err != nil {
			return contract.Result{}, err
		}
	}
	res := contract.Result{Reason: contract.ReasonCompleted, Format: info.Format, CDROM: info.Format == contract.FormatISO}
	p := planFor(info.Format, im.Registry != nil)
	if p.stream {
		err = im.streamToFile(disk, whole, &res)
	} else {
		err = im.staged(ctx, disk, whole, info.Format, p, &res)
	}
	if err != nil {
		return contract.Result{}, err
	}
	res.SourceSize = im.Progress.Snapshot().Read
	im.Progress.Done()
	return res, nil
}

// inspect tells the disk's format and unpacked size: from its header (qcow2, vmdk), from an
// uncompressed raw disk's or ISO's length as served, else by reading it through (compressed raw
// or ISO). The checksum is left to the import.
func (im *Import) inspect(disk io.Reader, info detect.Info, compressed bool, served int64) (contract.Result, error) {
	size := info.VirtualSize
	raw := info.Format == contract.FormatRaw || info.Format == contract.FormatISO
	switch {
	case size > 0:
	case raw && !compressed && served >= 0:
		size = served
	case raw:
		n, err := io.Copy(io.Discard, disk)
		if err != nil {
			return contract.Result{}, err
		}
		size = n
	default:
		return contract.Result{}, contract.Errorf(contract.ReasonUnsupportedFormat,
			"the unpacked size of a %s source is known only once it is imported: give the disk's size", info.Format)
	}
	if raw {
		if err := detect.CheckRawSize(size); err != nil {
			return contract.Result{}, err
		}
	}
	res := contract.Result{Reason: contract.ReasonCompleted, Format: info.Format, CDROM: info.Format == contract.FormatISO,
		UnpackedSize: size, SourceSize: im.Progress.Snapshot().Read}
	im.Progress.Done()
	return res, nil
}

// open peeks at the stream, undoes one compression, and detects the disk's format.
func open(r io.Reader) (disk io.Reader, info detect.Info, compressed bool, err error) {
	br, info, err := peek(r)
	if err != nil || info.Compression == detect.None {
		return br, info, false, err
	}
	u, err := unpack.Reader(info.Compression, br)
	if err != nil {
		return nil, detect.Info{}, true, err
	}
	ubr, inner, err := peek(u)
	if err != nil {
		return nil, detect.Info{}, true, err
	}
	if inner.Compression != detect.None {
		return nil, detect.Info{}, true, contract.Errorf(contract.ReasonUnsupportedFormat, "the source is %s inside %s: compress the disk image once", inner.Compression, info.Compression)
	}
	return ubr, inner, true, nil
}

func peek(r io.Reader) (*bufio.Reader, detect.Info, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	h, err := br.Peek(detect.HeaderSize)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, detect.Info{}, err
	}
	info, err := detect.Detect(h)
	return br, info, err
}

// finish reads what the source has left (nothing, for a sound stream) and verifies the checksum.
func (im *Import) finish(whole io.Reader) error {
	if _, err := io.Copy(io.Discard, whole); err != nil {
		return err
	}
	return im.Checksum.Verify()
}

func (im *Import) streamToFile(disk, whole io.Reader, res *contract.Result) (err error) {
	defer func() {
		if err != nil {
			im.abortFile()
		}
	}()
	n, err := im.File.WriteRaw(disk)
	if err != nil {
		return err
	}
	if err := im.finish(whole); err != nil {
		return err
	}
	if err := detect.CheckRawSize(n); err != nil {
		return err
	}
	if err := im.File.Commit(); err != nil {
		return err
	}
	res.UnpackedSize = n
	res.StoredSize, err = im.File.Stored()
	return err
}

func (im *Import) abortFile() {
	if err := im.File.Abort(); err != nil {
		im.Log.Error("cleaning up the destination", "path", im.File.Path, "error", err)
	}
}

// staged writes the disk into the scratch directory, verifies it, converts it if the plan says,
// and stores it.
func (im *Import) staged(ctx context.Context, disk, whole io.Reader, format string, p plan, res *contract.Result) error {
	start := im.Now()
	dir, err := os.MkdirTemp(im.ScratchDir, "import-")
	if err != nil {
		return fmt.Errorf("scratch space: %w", err)
	}
	defer os.RemoveAll(dir)
	staged := dir + "/source." + format
	n, err := destination.Stage(staged, disk)
	if err != nil {
		return err
	}
	if err := im.finish(whole); err != nil {
		return err
	}
	im.Log.Info("staged", "bytes", n, "seconds", im.since(start))
	virtual := n
	if format == contract.FormatRaw || format == contract.FormatISO {
		if err := detect.CheckRawSize(n); err != nil {
			return err
		}
	} else {
		info, err := im.QemuImg.Info(ctx, staged, format)
		if err != nil {
			return err
		}
		virtual = info.VirtualSize
	}
	if p.check {
		if err := im.QemuImg.Check(ctx, staged); err != nil {
			return err
		}
	}
	res.UnpackedSize = virtual
	if im.File != nil {
		return im.convertToFile(ctx, staged, format, virtual, res)
	}
	var stored destination.Disk
	switch {
	case p.convertTo == contract.FormatQcow2 && format == contract.FormatRaw:
		// The qcow2 image of the sparse staged disk goes into the push as it is generated.
		if stored, err = qcow2.Open(staged); err != nil {
			return contract.Errorf(contract.ReasonDestinationFailed, "%w", err)
		}
	case p.convertTo != "":
		converted := dir + "/disk." + p.convertTo
		if err := im.QemuImg.Convert(ctx, staged, format, converted, p.convertTo, false); err != nil {
			return contract.Errorf(contract.ReasonNotDiskImage, "%w", err)
		}
		im.Log.Info("converted", "to", p.convertTo, "seconds", im.since(start))
		staged = converted
		fallthrough
	default:
		if stored, err = destination.NewFileDisk(staged); err != nil {
			return err
		}
	}
	res.StoredSize = stored.Size()
	if res.Digest, err = im.Registry.Push(ctx, stored, p.diskName); err != nil {
		return err
	}
	im.Log.Info("pushed", "image", im.Registry.Image, "digest", res.Digest, "bytes", res.StoredSize, "seconds", im.since(start))
	return nil
}

func (im *Import) since(t time.Time) float64 { return im.Now().Sub(t).Seconds() }

func (im *Import) convertToFile(ctx context.Context, staged, format string, virtual int64, res *contract.Result) (err error) {
	if err := im.File.Fits(virtual); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			im.abortFile()
		}
	}()
	if err := im.QemuImg.Convert(ctx, staged, format, im.File.WritePath(), contract.FormatRaw, im.File.Block()); err != nil {
		return contract.Errorf(contract.ReasonDestinationFailed, "%w", err)
	}
	if err := im.File.Commit(); err != nil {
		return err
	}
	res.StoredSize, err = im.File.Stored()
	return err
}
