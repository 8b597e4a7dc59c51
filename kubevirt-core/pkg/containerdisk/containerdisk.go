// Package containerdisk brings the disk of a containerDisk image to virt-launcher. As in KubeVirt,
// the launcher Pod has one container per containerDisk volume whose image is the disk's image, so
// the node pulls it with the Pod's pull secrets and registry configuration; that container runs
// container-disk, which holds the disk file open and hands a read-only descriptor of it to
// whoever connects to its unix socket in the Pod's container-disks volume. The launcher asks for
// it and keeps it open as the read-only backing of the guest's qcow2 overlay. KubeVirt's
// virt-handler bind-mounts the file from the container's root instead; a descriptor passed over
// the shared volume needs no mount privileges and no shared PID namespace.
package containerdisk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/d8virt/kubevirt-core/pkg/unixsock"
)

// Dir is where the launcher Pod's container-disks volume is, in the compute container and in each
// containerDisk container.
const Dir = "/var/run/kubevirt/container-disks"

// DefaultImageDir is where a containerDisk image keeps its disk unless the volume's path says
// otherwise (KubeVirt's layout: the one file under /disk).
const DefaultImageDir = "/disk"

// Socket is the socket of the container that serves the disk of volume, in the volume dir.
func Socket(dir, volume string) string { return filepath.Join(dir, volume+".sock") }

// DiskFile is the disk a containerDisk image holds under root: the volume's path when it has one
// (a file, or a directory holding exactly one), else the one file under /disk.
func DiskFile(root, diskPath string) (string, error) {
	p := diskPath
	if p == "" {
		p = DefaultImageDir
	}
	// The path is the image's: it may not leave the image's root.
	full := filepath.Join(root, path.Clean("/"+p))
	st, err := os.Stat(full)
	if err != nil {
		return "", fmt.Errorf("containerDisk path %s: %w", p, err)
	}
	if st.Mode().IsRegular() {
		return full, nil
	}
	if !st.IsDir() {
		return "", fmt.Errorf("containerDisk path %s: neither a file nor a directory", p)
	}
	entries, err := os.ReadDir(full)
	if err != nil {
		return "", fmt.Errorf("containerDisk path %s: %w", p, err)
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			files = append(files, e.Name())
		}
	}
	if len(files) != 1 {
		return "", fmt.Errorf("containerDisk path %s: the image must hold exactly one disk file there, it holds %d (%s)", p, len(files), strings.Join(files, ", "))
	}
	return filepath.Join(full, files[0]), nil
}

// socketPoll is how often Serve looks whether its socket is still there.
const socketPoll = time.Second

// Serve hands a read-only descriptor of disk to every connection on l until ctx ends or l's
// socket file is removed: virt-launcher removes it when it ends, as KubeVirt's does, so that the
// containerDisk containers end with it.
func Serve(ctx context.Context, l *net.UnixListener, disk *os.File) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(socketPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := os.Stat(l.Addr().String()); errors.Is(err, os.ErrNotExist) {
					cancel()
					return
				}
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		_, _, err = conn.WriteMsgUnix([]byte(filepath.Base(disk.Name())), unix.UnixRights(int(disk.Fd())), nil)
		conn.Close()
		if err != nil {
			return fmt.Errorf("send the disk's descriptor: %w", err)
		}
	}
}

// Fetch asks the container-disk server at socket for its disk and returns the open file, named
// after the disk file in the image.
func Fetch(ctx context.Context, socket string) (*os.File, error) {
	conn, err := unixsock.Dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%s: not a unix socket connection", socket)
	}
	if d, ok := ctx.Deadline(); ok {
		if err := uc.SetReadDeadline(d); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 256)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("read from %s: %w", socket, err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("read from %s: %w", socket, err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, errors.New(socket + ": the answer holds no disk descriptor")
	}
	return os.NewFile(uintptr(fds[0]), string(buf[:n])), nil
}

// ProcPath is a path under which another process of this PID namespace (QEMU, libvirtd) opens f
// as this process holds it.
func ProcPath(f *os.File) string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd())
}
