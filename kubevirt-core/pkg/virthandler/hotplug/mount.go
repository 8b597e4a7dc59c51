package hotplug

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Mounter makes and removes bind mounts in the node's mount namespace. Paths are the node's.
type Mounter interface {
	Bind(ctx context.Context, source, target string) error
	Unmount(ctx context.Context, target string) error
	Mounted(target string) (bool, error)
	// NodePath is where a path of virt-handler's own mount namespace is on the node.
	NodePath(path string) (string, error)
}

// DefaultHostMountNamespace is the node's mount namespace as a virt-handler with the host's PID
// namespace sees it: that of the node's init.
const DefaultHostMountNamespace = "/proc/1/ns/mnt"

// ParentMountNamespace, as the namespace of a NodeMounter, is the mount namespace of
// virt-handler's parent process: for a container runtime that keeps pid 1's namespace from its
// containers while the process that starts them (its shim) runs in the node's namespace.
const ParentMountNamespace = "parent"

// NodeMounter works in the node's mount namespace, as KubeVirt's virt-chroot does: there the
// kubelet mounts the Pods' volumes, and a mount on the launcher's hotplug-disks volume reaches the
// launcher through that volume's HostToContainer propagation. It runs nsenter, mount and umount:
// a Go program cannot switch its own mount namespace (its threads share their filesystem state).
type NodeMounter struct {
	// Namespace is the node's mount namespace: /proc/<pid>/ns/mnt of a process in it, or
	// ParentMountNamespace. Empty means DefaultHostMountNamespace.
	Namespace string
}

// NewNodeMounter checks the namespace (virt-handler's --host-mount-namespace) and returns the
// mounter for it.
func NewNodeMounter(namespace string) (NodeMounter, error) {
	n := NodeMounter{Namespace: namespace}
	if _, err := n.pid(); err != nil {
		return NodeMounter{}, err
	}
	return n, nil
}

// pid is a process in the node's mount namespace, whose mountinfo tells the node's mounts.
func (n NodeMounter) pid() (int, error) {
	ns := n.Namespace
	switch ns {
	case "":
		ns = DefaultHostMountNamespace
	case ParentMountNamespace:
		return os.Getppid(), nil
	}
	rest, ok := strings.CutPrefix(ns, "/proc/")
	if p, ok2 := strings.CutSuffix(rest, "/ns/mnt"); ok && ok2 {
		if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("host mount namespace %q: want /proc/<pid>/ns/mnt or %q", n.Namespace, ParentMountNamespace)
}

// Check opens the node's mount namespace, which every mount needs.
func (n NodeMounter) Check() error {
	pid, err := n.pid()
	if err != nil {
		return err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return fmt.Errorf("host mount namespace: %w", err)
	}
	return f.Close()
}

func (n NodeMounter) run(ctx context.Context, args ...string) error {
	pid, err := n.pid()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-m", "--"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (n NodeMounter) Bind(ctx context.Context, source, target string) error {
	return n.run(ctx, "mount", "--bind", source, target)
}

func (n NodeMounter) Unmount(ctx context.Context, target string) error {
	return n.run(ctx, "umount", "-l", target)
}

func (n NodeMounter) Mounted(target string) (bool, error) {
	ms, err := n.nodeMounts(mountinfo.SingleEntryFilter(target))
	if err != nil {
		return false, err
	}
	return len(ms) > 0, nil
}

func (n NodeMounter) NodePath(path string) (string, error) {
	own, err := readMountInfo("/proc/self/mountinfo", nil)
	if err != nil {
		return "", err
	}
	node, err := n.nodeMounts(nil)
	if err != nil {
		return "", err
	}
	return translate(path, own, node)
}

// nodeMounts are the mounts of the node's mount namespace that filter accepts (nil: all).
func (n NodeMounter) nodeMounts(filter mountinfo.FilterFunc) ([]*mountinfo.Info, error) {
	pid, err := n.pid()
	if err != nil {
		return nil, err
	}
	return readMountInfo(fmt.Sprintf("/proc/%d/mountinfo", pid), filter)
}

func readMountInfo(file string, filter mountinfo.FilterFunc) ([]*mountinfo.Info, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms, err := mountinfo.GetMountsFromReader(f, filter)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ms, nil
}

// under reports whether p is dir or below it, and the rest of p below dir.
func under(p, dir string) (string, bool) {
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if p == dir {
		return "", true
	}
	if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
		return rest, true
	}
	return "", false
}

func sameDevice(a, b *mountinfo.Info) bool { return a.Major == b.Major && a.Minor == b.Minor }

// translate finds where path of one mount namespace (own) is in another (node): the mount
// holding it names a device and a path in that device's file system, and node shows the same
// file through a mount of the same device whose root holds that path.
func translate(path string, own, node []*mountinfo.Info) (string, error) {
	path = filepath.Clean(path)
	var holder *mountinfo.Info
	rel := ""
	for _, m := range own {
		// The last mount on the longest prefix is the visible one.
		if r, ok := under(path, m.Mountpoint); ok && (holder == nil || len(m.Mountpoint) >= len(holder.Mountpoint)) {
			holder, rel = m, r
		}
	}
	if holder == nil {
		return "", fmt.Errorf("no mount holds %s", path)
	}
	inFS := filepath.Join(holder.Root, rel)
	var best *mountinfo.Info
	bestRest := ""
	for _, m := range node {
		if !sameDevice(m, holder) {
			continue
		}
		if r, ok := under(inFS, m.Root); ok && (best == nil || len(m.Root) > len(best.Root)) {
			best, bestRest = m, r
		}
	}
	if best == nil {
		return "", fmt.Errorf("%s (device %d:%d, %s) is not mounted on the node", path, holder.Major, holder.Minor, inFS)
	}
	return filepath.Join(best.Mountpoint, bestRest), nil
}
