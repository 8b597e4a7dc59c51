package hostvol

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

const mib = 1 << 20

func fsSize(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Bsize
}

// fsFree is what unprivileged users may still write in dir's file system.
func fsFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

func devSize(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mounted(t *testing.T, dir string) bool {
	t.Helper()
	m, err := mountinfo.Mounted(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The store on real loop devices (the tests run as root, as the stack does): a Filesystem and a
// Block volume are made, grow, are released and attached again with their data, and go.
func TestStore(t *testing.T) {
	ctx := context.Background()
	s, err := New(t.TempDir(), Exec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{"fs", "blk"} {
			if err := s.Remove(ctx, n); err != nil {
				t.Errorf("cleanup %s: %v", n, err)
			}
		}
	})
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock

	if err := s.Create(ctx, "fs", fs, 16*mib); err != nil {
		t.Fatal(err)
	}
	mp := s.Path("fs", fs)
	if !mounted(t, s.mountPoint("fs")) {
		t.Fatalf("%s is not mounted", mp)
	}
	small := fsSize(t, mp)
	// Pods may write the size the volume was made for.
	if free := fsFree(t, mp); free < 16*mib || small > BackingSize(fs, 16*mib) {
		t.Errorf("a 16 MiB volume's file system has %d bytes, %d free", small, free)
	}
	if err := os.WriteFile(filepath.Join(mp, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Grow(ctx, "fs", fs, 40*mib); err != nil {
		t.Fatal(err)
	}
	// A container's mount (here: a bind mount on the host) holds the file system: it waits.
	held := t.TempDir()
	if err := unix.Mount(mp, held, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.ResizeFS(ctx, "fs"); !errors.Is(err, ErrInUse) {
		t.Errorf("resize of a file system in use: %v", err)
	}
	if err := unix.Unmount(held, 0); err != nil {
		t.Fatal(err)
	}
	if !mounted(t, s.mountPoint("fs")) || fsSize(t, mp) != small {
		t.Errorf("after a refused resize the file system is not mounted as it was")
	}
	if err := s.ResizeFS(ctx, "fs"); err != nil {
		t.Fatal(err)
	}
	if big, free := fsSize(t, mp), fsFree(t, mp); big < small+20*mib || free < 40*mib-mib {
		t.Errorf("grown to 40 MiB, the file system has %d bytes, %d free (was %d)", big, free, small)
	}
	if n, _ := s.Size("fs"); n != BackingSize(fs, 40*mib) {
		t.Errorf("backing file %d bytes", n)
	}

	if err := s.Create(ctx, "blk", block, 4*mib); err != nil {
		t.Fatal(err)
	}
	link := s.Path("blk", block)
	if got := devSize(t, link); got != 4*mib {
		t.Errorf("block device of %d bytes", got)
	}
	if err := s.Grow(ctx, "blk", block, 8*mib); err != nil {
		t.Fatal(err)
	}
	if got := devSize(t, link); got != 8*mib {
		t.Errorf("grown block device of %d bytes", got)
	}

	// Released (devcluster down), then attached again (the next up): the data is there.
	fsDev, _ := s.Device("fs")
	if err := s.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if mounted(t, s.mountPoint("fs")) {
		t.Errorf("%s still mounted after release", mp)
	}
	if _, err := os.Stat(mp); !os.IsNotExist(err) {
		t.Errorf("the data directory %s is there without its file system: %v", mp, err)
	}
	for _, n := range []string{"fs", "blk"} {
		if dev, err := s.Device(n); err != nil || dev != "" {
			t.Errorf("%s still attached to %q (%v)", n, dev, err)
		}
	}
	for _, n := range []string{"fs", "blk"} {
		mode := fs
		if n == "blk" {
			mode = block
		}
		if err := s.Ensure(ctx, n, mode); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(mp, "data")); err != nil || string(b) != "kept" {
		t.Errorf("data after re-attaching: %q, %v", b, err)
	}
	if got := devSize(t, link); got != 8*mib {
		t.Errorf("re-attached block device of %d bytes", got)
	}

	// Ensure on an attached volume changes nothing; Create of an existing one only attaches.
	dev, _ := s.Device("fs")
	if err := s.Create(ctx, "fs", fs, 16*mib); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Device("fs"); again != dev || !strings.HasPrefix(dev, "/dev/loop") {
		t.Errorf("device %s, then %s (first %s)", dev, again, fsDev)
	}

	for _, n := range []string{"fs", "blk"} {
		dev, _ := s.Device(n)
		if err := s.Remove(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(s.Dir(), n)); !os.IsNotExist(err) {
			t.Errorf("%s: directory left: %v", n, err)
		}
		if b, _ := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/backing_file"); len(b) > 0 {
			t.Errorf("%s: %s still backed by %s", n, dev, b)
		}
	}
	if ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(s.Dir())); err != nil || len(ms) > 0 {
		t.Errorf("mounts left under %s: %v %v", s.Dir(), ms, err)
	}
	if err := s.Remove(ctx, "fs"); err != nil {
		t.Errorf("removing a removed volume: %v", err)
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"pvc-1", true}, {"", false}, {".", false}, {"..", false}, {"a/b", false}, {".pvc-1.new", false}} {
		if err := checkName(tt.name); (err == nil) != tt.ok {
			t.Errorf("checkName(%q) = %v", tt.name, err)
		}
	}
}

func TestBackingSize(t *testing.T) {
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	for _, tc := range []struct {
		mode       corev1.PersistentVolumeMode
		size, want int64
	}{
		{block, 4 * mib, 4 * mib},
		{fs, 32 * mib, 66 * mib},
		{fs, 100 * mib, 139 * mib}, // 100 + 6.25 + 32, in whole MiB
		{fs, 16 << 30, 17<<30 + 32*mib},
	} {
		if got := BackingSize(tc.mode, tc.size); got != tc.want {
			t.Errorf("BackingSize(%s, %d) = %d, want %d", tc.mode, tc.size, got, tc.want)
		}
	}
}
