package hotplug

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Mounter makes and removes bind mounts in the node's mount namespace. Paths are the node's.
type Mounter interface {
	Bind(ctx context.Context, source, target string) error
	Unmount(ctx context.Context, target string) error
	Mounted(target string) (bool, error)
	// NodePath is where a path of virt-handler's own mount namespace is on the node.
	NodePath(path string) (string, error)
}

// NodeMounter works in the node's mount namespace, as KubeVirt's virt-chroot does: a mount there
// reaches the launcher's hotplug-disks volume through its HostToContainer propagation. That is
// the namespace of the node's init process (virt-handler runs with the host's PID namespace);
// where a sandbox keeps that one from being opened, the namespace of virt-handler's parent, the
// container runtime's shim, which runs in the node's namespace. It runs nsenter, mount and
// umount: a Go program cannot switch its own mount namespace (its threads share their
// filesystem state).
type NodeMounter struct{}

// nodePid is a process in the node's mount namespace.
func nodePid() string {
	if f, err := os.Open("/proc/1/ns/mnt"); err == nil {
		f.Close()
		return "1"
	}
	return strconv.Itoa(os.Getppid())
}

func (NodeMounter) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", nodePid(), "-m", "--"}, args...)...)
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

func (NodeMounter) Mounted(target string) (bool, error) {
	ms, err := readMountInfo("/proc/" + nodePid() + "/mountinfo")
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.point == target {
			return true, nil
		}
	}
	return false, nil
}

func (NodeMounter) NodePath(path string) (string, error) {
	own, err := readMountInfo("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	node, err := readMountInfo("/proc/" + nodePid() + "/mountinfo")
	if err != nil {
		return "", err
	}
	return translate(path, own, node)
}

// mountInfo is one line of /proc/<pid>/mountinfo: the device, the path inside its file system
// the mount shows (root) and where it is mounted (point).
type mountInfo struct {
	dev, root, point string
}

func readMountInfo(file string) ([]mountInfo, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []mountInfo
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		out = append(out, mountInfo{dev: f[2], root: unescape(f[3]), point: unescape(f[4])})
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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

// translate finds where path of one mount namespace (own) is in another (node): the mount
// holding it names a device and a path in that device's file system, and node shows the same
// file through a mount of the same device whose root holds that path.
func translate(path string, own, node []mountInfo) (string, error) {
	path = filepath.Clean(path)
	var holder *mountInfo
	rel := ""
	for i := range own {
		// The last mount on the longest prefix is the visible one.
		if r, ok := under(path, own[i].point); ok && (holder == nil || len(own[i].point) >= len(holder.point)) {
			holder, rel = &own[i], r
		}
	}
	if holder == nil {
		return "", fmt.Errorf("no mount holds %s", path)
	}
	inFS := filepath.Join(holder.root, rel)
	best, bestRest := (*mountInfo)(nil), ""
	for i := range node {
		if node[i].dev != holder.dev {
			continue
		}
		if r, ok := under(inFS, node[i].root); ok && (best == nil || len(node[i].root) > len(best.root)) {
			best, bestRest = &node[i], r
		}
	}
	if best == nil {
		return "", fmt.Errorf("%s (device %s, %s) is not mounted on the node", path, holder.dev, inFS)
	}
	return filepath.Join(best.point, bestRest), nil
}
