// Command container-disk runs in each containerDisk container of a launcher Pod (see
// pkg/containerdisk): it opens the disk of the container's image read-only and hands its
// descriptor to virt-launcher over a unix socket in the Pod's container-disks volume until it is
// told to stop. With --copy-to it only copies itself there: the launcher Pod's init container does
// that from the launcher image, since a containerDisk image holds nothing but the disk.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/d8virt/kubevirt-core/pkg/containerdisk"
	"github.com/d8virt/logopts"
)

func main() {
	fs := flag.NewFlagSet("container-disk", flag.ExitOnError)
	socket := fs.String("socket", "", "unix socket to serve the disk's descriptor on")
	diskPath := fs.String("disk-path", "", "the disk in the image: a file, or a directory with one file (default "+containerdisk.DefaultImageDir+")")
	copyTo := fs.String("copy-to", "", "copy this program to the file and exit (the init container)")
	log := logopts.Default()
	log.Bind(fs)
	_ = fs.Parse(os.Args[1:])
	h, err := log.Handler(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	logger := slog.New(h)
	if *copyTo != "" {
		err = copySelf(*copyTo)
	} else {
		err = serve(*socket, *diskPath, logger)
	}
	if err != nil {
		logger.Error("container-disk failed", "err", err)
		os.Exit(1)
	}
}

// serve holds the image's disk open and serves it on socket until SIGTERM or SIGINT.
func serve(socket, diskPath string, log *slog.Logger) error {
	if socket == "" {
		return fmt.Errorf("--socket is required")
	}
	path, err := containerdisk.DiskFile("/", diskPath)
	if err != nil {
		return err
	}
	disk, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open the disk: %w", err)
	}
	defer disk.Close()
	// A socket left by an earlier run of the container would refuse the bind.
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("serving the containerDisk", "disk", path, "socket", socket)
	return containerdisk.Serve(ctx, l, disk)
}

// copySelf copies the running program to dst, executable.
func copySelf(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", self, dst, err)
	}
	return out.Close()
}
