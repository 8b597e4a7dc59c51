// Package hostvol keeps the local stack's volumes on this machine: each volume is a sparse file
// of its real size under one directory, attached to a loop device. A Filesystem volume is an ext4
// file system in that file, mounted at a host directory; a Block volume is the loop device
// itself, reached through a symlink that stays put when the loop device's number changes (after
// a reboot or `devcluster down`, Ensure attaches it again).
//
//	<dir>/<name>/disk.img      the sparse backing file
//	<dir>/<name>/mount/        Filesystem: where the file system is mounted
//	<dir>/<name>/mount/data/   Filesystem: what pods get, a directory inside the file system, so
//	                           that it is not there at all while the file system is not mounted
//	<dir>/<name>/device        Block: a symlink to /dev/loopN
//
// Growing an ext4 while it is mounted needs CAP_SYS_RESOURCE, which the machines this stack runs
// on do not grant even to root, so ResizeFS grows a file system offline, when no container has
// it mounted: Kubernetes' own protocol for such volumes (FileSystemResizePending until the pod
// restarts).
package hostvol

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

const (
	diskFile   = "disk.img"
	mountDir   = "mount"
	dataDir    = "data"
	deviceLink = "device"
)

// ErrInUse is ResizeFS's answer while a container has the file system mounted.
var ErrInUse = errors.New("the file system is in use: it grows when no pod uses it")

// Runner runs a program and returns its combined output.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Exec runs programs from PATH.
type Exec struct{}

// Run runs name with args; a failure carries the program's output.
func (Exec) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Store is the directory of volumes.
type Store struct {
	dir string
	run Runner
	// sysBlock is where the kernel lists block devices (/sys/block): loop devices name their
	// backing file there.
	sysBlock string
}

// New opens (and creates) the volume directory. The path is made absolute with its symlinks
// resolved, since the kernel reports a loop device's backing file that way.
func New(dir string, run Runner) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("volume directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("volume directory %s: %w", dir, err)
	}
	return &Store{dir: abs, run: run, sysBlock: "/sys/block"}, nil
}

// Dir is the volume directory.
func (s *Store) Dir() string { return s.dir }

// Path is what a pod uses of the volume: a directory in the mounted file system of a Filesystem
// volume, the device symlink of a Block volume.
func (s *Store) Path(name string, mode corev1.PersistentVolumeMode) string {
	if mode == corev1.PersistentVolumeBlock {
		return filepath.Join(s.dir, name, deviceLink)
	}
	return filepath.Join(s.mountPoint(name), dataDir)
}

func (s *Store) mountPoint(name string) string { return filepath.Join(s.dir, name, mountDir) }

func (s *Store) image(name string) string { return filepath.Join(s.dir, name, diskFile) }

// checkName refuses names that are not one plain path element.
func checkName(name string) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, ".") {
		return fmt.Errorf("volume name %q is not a plain file name", name)
	}
	return nil
}

// Exists tells whether the volume's directory is there.
func (s *Store) Exists(name string) bool {
	_, err := os.Stat(s.image(name))
	return err == nil
}

// Create makes a volume of size bytes and attaches it (and mounts a Filesystem volume). The file
// is prepared under a temporary name and renamed into place when complete, so a crash never
// leaves a half-made volume behind a real name; creating a volume that exists only attaches it.
func (s *Store) Create(ctx context.Context, name string, mode corev1.PersistentVolumeMode, size int64) error {
	if err := checkName(name); err != nil {
		return err
	}
	if s.Exists(name) {
		return s.Ensure(ctx, name, mode)
	}
	tmp := filepath.Join(s.dir, "."+name+".new")
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	img := filepath.Join(tmp, diskFile)
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	err = f.Truncate(BackingSize(mode, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("volume %s: size the backing file: %w", name, err)
	}
	if mode != corev1.PersistentVolumeBlock {
		// No reserved blocks: the claim's size is the user's.
		if _, err := s.run.Run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", img); err != nil {
			return fmt.Errorf("volume %s: %w", name, err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return s.Ensure(ctx, name, mode)
}

// Ensure attaches the volume's loop device if it is not attached, and mounts a Filesystem volume
// or points a Block volume's symlink at its device. It changes nothing on a volume in use.
func (s *Store) Ensure(ctx context.Context, name string, mode corev1.PersistentVolumeMode) error {
	dev, err := s.attach(ctx, name)
	if err != nil {
		return err
	}
	if mode == corev1.PersistentVolumeBlock {
		link := s.Path(name, mode)
		if cur, err := os.Readlink(link); err == nil && cur == dev {
			return nil
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("volume %s: %w", name, err)
		}
		if err := os.Symlink(dev, link); err != nil {
			return fmt.Errorf("volume %s: %w", name, err)
		}
		return nil
	}
	mp := s.mountPoint(name)
	if err := os.MkdirAll(mp, 0o755); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	mounted, err := mountinfo.Mounted(mp)
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	if !mounted {
		if err := unix.Mount(dev, mp, "ext4", 0, ""); err != nil {
			return fmt.Errorf("volume %s: mount %s on %s: %w", name, dev, mp, err)
		}
	}
	// Only in the mounted file system: never a directory of the host's in its place.
	if err := os.Mkdir(s.Path(name, mode), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// attach returns the loop device of the volume's file, attaching one if there is none.
func (s *Store) attach(ctx context.Context, name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	img := s.image(name)
	if _, err := os.Stat(img); err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	dev, err := s.Device(name)
	if err != nil || dev != "" {
		return dev, err
	}
	out, err := s.run.Run(ctx, "losetup", "--find", "--show", img)
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Device is the loop device attached to the volume's file, or "" when there is none.
func (s *Store) Device(name string) (string, error) {
	img := s.image(name)
	files, err := filepath.Glob(filepath.Join(s.sysBlock, "loop*", "loop", "backing_file"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // detached meanwhile
		}
		if err != nil {
			return "", fmt.Errorf("volume %s: %w", name, err)
		}
		if strings.TrimSpace(string(b)) == img {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f))), nil
		}
	}
	return "", nil
}

// Size is the size of the volume's backing file.
func (s *Store) Size(name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	st, err := os.Stat(s.image(name))
	if err != nil {
		return 0, fmt.Errorf("volume %s: %w", name, err)
	}
	return st.Size(), nil
}

// BackingSize is the backing file of a volume of size bytes. A Block volume is its size. A
// Filesystem volume's ext4 keeps some of it for itself (the journal, inode tables, superblocks:
// 11MiB of 66MiB, 2-3% of large ones), so its file is larger by 1/16 and 32MiB, in whole MiB:
// pods can write the size they asked for (a disk.img of the claim's size fits). The file is
// sparse: the share costs nothing until ext4 writes it.
func BackingSize(mode corev1.PersistentVolumeMode, size int64) int64 {
	const mib = 1 << 20
	if mode == corev1.PersistentVolumeBlock {
		return size
	}
	n := size + size/16 + 32*mib
	return (n + mib - 1) / mib * mib
}

// Grow makes the volume hold at least size bytes (its backing file and loop device
// BackingSize); the file system in a Filesystem volume grows with ResizeFS. It never shrinks a
// volume.
func (s *Store) Grow(ctx context.Context, name string, mode corev1.PersistentVolumeMode, size int64) error {
	if err := s.Ensure(ctx, name, mode); err != nil {
		return err
	}
	cur, err := s.Size(name)
	if err != nil {
		return err
	}
	if want := BackingSize(mode, size); cur < want {
		if err := os.Truncate(s.image(name), want); err != nil {
			return fmt.Errorf("volume %s: grow the backing file: %w", name, err)
		}
	}
	dev, err := s.Device(name)
	if err != nil {
		return err
	}
	// Tell the loop device its file's size changed (a no-op when it did not).
	if _, err := s.run.Run(ctx, "losetup", "--set-capacity", dev); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// ResizeFS grows a Filesystem volume's ext4 to its device. It unmounts the file system, checks
// and grows it, and mounts it again; while a container has it mounted (the device is held
// exclusively by the mounted file system) it changes nothing and returns ErrInUse. While the
// file system is unmounted its data directory does not exist, so no pod starting meanwhile can
// bind the host's empty mount point instead.
func (s *Store) ResizeFS(ctx context.Context, name string) (err error) {
	fsMode := corev1.PersistentVolumeFilesystem
	if err := s.Ensure(ctx, name, fsMode); err != nil {
		return err
	}
	dev, err := s.Device(name)
	if err != nil {
		return err
	}
	// Look before unmounting, so that a pod that runs keeps its volume's directory on the host
	// (a container restarting binds it again).
	if busy, err := mountedElsewhere(dev); err != nil || busy {
		return errors.Join(err, ErrInUse)
	}
	if err := unix.Unmount(s.mountPoint(name), 0); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return ErrInUse
		}
		return fmt.Errorf("volume %s: unmount: %w", name, err)
	}
	defer func() { err = errors.Join(err, s.Ensure(ctx, name, fsMode)) }()
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return ErrInUse
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	unix.Close(fd)
	// resize2fs wants a freshly checked file system; exit status 1 means errors were fixed.
	var exit *exec.ExitError
	if _, err := s.run.Run(ctx, "e2fsck", "-f", "-p", dev); err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	if _, err := s.run.Run(ctx, "resize2fs", dev); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// mountedElsewhere tells whether a mount namespace other than this process's (a container's)
// has a file system of the device mounted.
func mountedElsewhere(dev string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dev, err)
	}
	major, minor := int(unix.Major(st.Rdev)), int(unix.Minor(st.Rdev))
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return false, err
	}
	seen := map[string]bool{own: true}
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return false, err
	}
	for _, p := range pids {
		ns, err := os.Readlink(filepath.Join(p, "ns", "mnt"))
		if err != nil || seen[ns] {
			continue // gone meanwhile, or a namespace already looked at
		}
		seen[ns] = true
		f, err := os.Open(filepath.Join(p, "mountinfo"))
		if err != nil {
			continue
		}
		ms, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (bool, bool) {
			return m.Major != major || m.Minor != minor, false
		})
		f.Close()
		if err == nil && len(ms) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// Release unmounts the volume and detaches its loop device, keeping its data. A device still
// open (a container that has not gone yet) is detached by the kernel when it is closed.
func (s *Store) Release(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	mp := s.mountPoint(name)
	if mounted, err := mountinfo.Mounted(mp); err == nil && mounted {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("volume %s: unmount %s: %w", name, mp, err)
		}
	}
	dev, err := s.Device(name)
	if err != nil || dev == "" {
		return err
	}
	if _, err := s.run.Run(ctx, "losetup", "--detach", dev); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// Remove releases the volume and deletes its file; removing a volume that is gone is no error.
func (s *Store) Remove(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(s.dir, name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := s.Release(ctx, name); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
		return fmt.Errorf("volume %s: %w", name, err)
	}
	return nil
}

// Names lists the volumes in the store.
func (s *Store) Names() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("volume directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && checkName(e.Name()) == nil {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// ReleaseAll releases every volume of the store (`devcluster down`), keeping their data; the
// next start of the provisioner attaches them again.
func (s *Store) ReleaseAll(ctx context.Context) error {
	names, err := s.Names()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, s.Release(ctx, n))
	}
	return errors.Join(errs...)
}
