// Package filelock serialises work between processes with flock(2). The kernel drops the lock when
// its holder exits, so a crash never leaves a stale lock behind.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive lock on path, creating the file and its directory, and returns the
// function that releases it.
func Lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create lock dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// ErrHeld is TryLock's error when another process holds the lock.
var ErrHeld = errors.New("held by another process")

// TryLock is Lock without the wait: it fails with an error wrapping ErrHeld at once when another
// process holds the lock. The file stays open while the lock is held; the caller may write to it
// (who holds it, say) through the returned file, which unlock closes.
func TryLock(path string) (f *os.File, unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("create lock dir: %w", err)
	}
	f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("lock %s: %w", path, ErrHeld)
		}
		return nil, nil, fmt.Errorf("take lock %s: %w", path, err)
	}
	return f, func() { f.Close() }, nil
}
