// Package unixsock dials unix sockets by paths of any length. A socket address holds at most 107
// bytes, and the sockets virt-handler reaches inside a Pod's volumes
// (/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/...) are longer than that, so the
// socket's directory is opened and the socket dialed through /proc/self/fd.
package unixsock

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxPath is the longest path a sockaddr_un takes with its terminating NUL.
const maxPath = 107

// Dial connects to the unix socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) <= maxPath {
		return d.DialContext(ctx, "unix", path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open directory of socket %s: %w", path, err)
	}
	defer unix.Close(fd)
	short := fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path))
	conn, err := d.DialContext(ctx, "unix", short)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return conn, nil
}
