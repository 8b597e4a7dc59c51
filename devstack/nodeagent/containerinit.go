package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// runInit becomes the container: private mount and UTS namespaces with the pod's mounts and
// hostname, the pod's network namespace, then exec.
func runInit(specPath string) int {
	runtime.LockOSThread()
	ctrDir := filepath.Dir(specPath)
	// The container directory may sit below a directory that gets a private mount (a root dir
	// in /tmp), so it is opened before anything is mounted.
	dirFd, dirErr := unix.Open(ctrDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node-agent container-init:", err)
		if dirErr == nil {
			if fd, err2 := unix.Openat(dirFd, startErrorFile, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644); err2 == nil {
				_, _ = unix.Write(fd, []byte(err.Error()))
				unix.Close(fd)
			}
		}
		return startErrorExitCode
	}
	var spec InitSpec
	if err := readJSON(specPath, &spec); err != nil {
		return fail(err)
	}
	var netns *os.File
	if spec.NetNS != "" {
		f, err := os.Open(spec.NetNS)
		if err != nil {
			return fail(fmt.Errorf("open network namespace: %w", err))
		}
		netns = f
	}
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWUTS); err != nil {
		return fail(fmt.Errorf("unshare: %w", err))
	}
	// Slave, not private: a bind of a slave mount is a slave too, which HostToContainer mounts
	// need; every other mount is made private right after it is bound (bindMount).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fail(fmt.Errorf("make / slave: %w", err))
	}
	// Every mount source is opened before anything is mounted, and mounted through /proc/self/fd,
	// so that a private directory mounted earlier never hides the source of a later one. (After
	// the unshare: the source of a bind mount must be in the caller's mount namespace.)
	mounts := SortMounts(spec.Mounts)
	sources := make([]mountSource, len(mounts))
	for i, m := range mounts {
		src, err := openSource(m.Source)
		if err != nil {
			return fail(fmt.Errorf("mount %s: %w", m.Target, err))
		}
		sources[i] = src
	}
	if spec.PrivateDev {
		if err := privateDev(); err != nil {
			return fail(err)
		}
	}
	for i, m := range mounts {
		if err := bindMount(m, sources[i]); err != nil {
			return fail(err)
		}
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fail(fmt.Errorf("set hostname: %w", err))
		}
	}
	if netns != nil {
		if err := unix.Setns(int(netns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fail(fmt.Errorf("enter network namespace %s: %w", spec.NetNS, err))
		}
		netns.Close()
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.Chdir(dir); err != nil {
		return fail(fmt.Errorf("working directory: %w", err))
	}
	// A program below a private directory is there too: the node agent mounts it at its path.
	err := syscall.Exec(spec.Path, spec.Argv, spec.Env)
	return fail(fmt.Errorf("exec %s: %w", spec.Path, err))
}

// SortMounts orders mounts so that a mount inside another one's target comes after it (by the
// number of path elements of the target, stable otherwise), as container runtimes do.
func SortMounts(ms []Mount) []Mount {
	out := append([]Mount{}, ms...)
	depth := func(p string) int { return strings.Count(filepath.Clean(p), "/") }
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].Target) < depth(out[j].Target) })
	return out
}

// mountSource is a mount source held open by an O_PATH descriptor.
type mountSource struct {
	path  string // /proc/self/fd/N
	isDir bool
}

func openSource(p string) (mountSource, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return mountSource{}, fmt.Errorf("open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return mountSource{}, fmt.Errorf("stat %s: %w", p, err)
	}
	return mountSource{path: "/proc/self/fd/" + strconv.Itoa(fd), isDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}, nil
}

func bindMount(m Mount, src mountSource) error {
	if src.isDir {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(m.Target), 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.Target, err)
		}
		if _, err := os.Stat(m.Target); errors.Is(err, os.ErrNotExist) {
			f, err := os.OpenFile(m.Target, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return fmt.Errorf("mount point %s: %w", m.Target, err)
			}
			f.Close()
		}
	}
	if err := unix.Mount(src.path, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
	}
	if !m.HostToContainer {
		if err := unix.Mount("", m.Target, "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make %s private: %w", m.Target, err)
		}
	}
	if !m.ReadOnly {
		return nil
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, m.Target, unix.AT_RECURSIVE, attr); err == nil {
		return nil
	}
	if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", m.Target, err)
	}
	return nil
}
