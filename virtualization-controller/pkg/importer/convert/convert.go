// Package convert runs qemu-img: what a staged image is (info, check) and converting it to the
// format its destination stores (raw for a PVC, qcow2 for DVCR).
package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// QemuImg runs the qemu-img binary at Path.
type QemuImg struct {
	Path string
}

// Info is what qemu-img info says of an image.
type Info struct {
	Format      string `json:"format"`
	VirtualSize int64  `json:"virtual-size"`
	ActualSize  int64  `json:"actual-size"`
	BackingFile string `json:"backing-filename"`
}

// Info reads the image at file as format (a contract.Format*). qemu-img failing to open it means
// the data is no image of that format.
func (q QemuImg) Info(ctx context.Context, file, format string) (Info, error) {
	out, err := q.run(ctx, "info", "--output=json", "-f", format, file)
	if err != nil {
		return Info{}, contract.Errorf(contract.ReasonNotDiskImage, "the source looks like %s but qemu-img cannot read it: %w", format, err)
	}
	var i Info
	if err := json.Unmarshal(out, &i); err != nil {
		return Info{}, fmt.Errorf("qemu-img info %s: %w", file, err)
	}
	if i.BackingFile != "" {
		return Info{}, contract.Errorf(contract.ReasonUnsupportedFormat, "the source is a %s image with a backing file (%s): only self-contained images are supported", format, i.BackingFile)
	}
	return i, nil
}

// Check verifies a qcow2 image's metadata (a truncated or corrupt image fails).
func (q QemuImg) Check(ctx context.Context, file string) error {
	if _, err := q.run(ctx, "check", "-f", contract.FormatQcow2, file); err != nil {
		return contract.Errorf(contract.ReasonNotDiskImage, "the source is a damaged qcow2 image: %w", err)
	}
	return nil
}

// Convert writes src (in srcFormat) to dst in dstFormat. existing says dst is there to be written
// in place (a block device) rather than created.
func (q QemuImg) Convert(ctx context.Context, src, srcFormat, dst, dstFormat string, existing bool) error {
	args := []string{"convert", "-f", srcFormat, "-O", dstFormat, "-W"}
	if existing {
		args = append(args, "-n")
	}
	if _, err := q.run(ctx, append(args, src, dst)...); err != nil {
		return fmt.Errorf("converting %s to %s: %w", srcFormat, dstFormat, err)
	}
	return nil
}

func (q QemuImg) run(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, q.Path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("qemu-img %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
