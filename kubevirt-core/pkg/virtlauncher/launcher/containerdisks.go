package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/d8virt/kubevirt-core/pkg/containerdisk"
)

// fetchTimeout bounds one request to a containerDisk container; a container that is not up yet
// fails it, and the next Sync asks again.
const fetchTimeout = 10 * time.Second

// containerDisks are the disks of the launcher Pod's containerDisk containers, each fetched once
// and held open for the life of the launcher: QEMU reads them as the backing files of the
// overlays, by containerdisk.ProcPath.
type containerDisks struct {
	dir   string
	mu    sync.Mutex
	files map[string]*os.File
}

func newContainerDisks(dir string) *containerDisks {
	return &containerDisks{dir: dir, files: map[string]*os.File{}}
}

// path is where QEMU opens the base image of volume's containerDisk.
func (c *containerDisks) path(ctx context.Context, volume string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.files[volume]; ok {
		return containerdisk.ProcPath(f), nil
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	f, err := containerdisk.Fetch(ctx, containerdisk.Socket(c.dir, volume))
	if err != nil {
		return "", fmt.Errorf("the disk of container %s: %w", "volume"+volume, err)
	}
	c.files[volume] = f
	return containerdisk.ProcPath(f), nil
}

// close lets go of every disk, the domain being gone, and removes the containers' sockets, which
// tells them to end (containerdisk.Serve), so the Pod completes with its launcher.
func (c *containerDisks) close(log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for v, f := range c.files {
		f.Close()
		delete(c.files, v)
	}
	socks, _ := filepath.Glob(containerdisk.Socket(c.dir, "*"))
	for _, s := range socks {
		if err := os.Remove(s); err != nil {
			log.Warn("remove containerDisk socket", "socket", s, "err", err)
		}
	}
}

// imageInfo is what qemu-img info says of an image that decides how it may back an overlay.
type imageInfo struct {
	Format          string `json:"format"`
	BackingFilename string `json:"backing-filename"`
}

// baseFormat is the format of a containerDisk's base image, qcow2 or raw (an ISO is raw): the
// overlay names it rather than letting QEMU probe. An image with a backing file of its own is
// refused, as it would make QEMU open a file of the node that no one chose.
func baseFormat(info imageInfo) (string, error) {
	if info.BackingFilename != "" {
		return "", fmt.Errorf("the image has a backing file (%s); a containerDisk must be self-contained", info.BackingFilename)
	}
	switch info.Format {
	case "qcow2", "raw":
		return info.Format, nil
	}
	return "", fmt.Errorf("image format %q: a containerDisk is qcow2, raw or an ISO", info.Format)
}

// imageFormat reads path's format with qemu-img (without a lock: the file is read-only) and
// checks it with baseFormat.
func imageFormat(ctx context.Context, path string) (string, error) {
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "--output=json", "-U", path).Output()
	if err != nil {
		return "", fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info imageInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return baseFormat(info)
}
