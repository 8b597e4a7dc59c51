package proc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A descriptor handed down without close-on-exec (as flock(1) hands its lock to the command)
// is close-on-exec afterwards; stdin, stdout and stderr stay inheritable.
func TestCloseInheritedOnExec(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// dup gives a descriptor without close-on-exec, like one inherited from a parent.
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cloexec := func(fd int) bool {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			t.Fatalf("fcntl %d: %v", fd, err)
		}
		return flags&unix.FD_CLOEXEC != 0
	}
	if cloexec(fd) {
		t.Fatal("a dup'ed descriptor is close-on-exec already")
	}
	if err := CloseInheritedOnExec(); err != nil {
		t.Fatal(err)
	}
	if !cloexec(fd) {
		t.Errorf("descriptor %d is still inherited by children", fd)
	}
	if cloexec(2) {
		t.Errorf("stderr became close-on-exec")
	}
}
