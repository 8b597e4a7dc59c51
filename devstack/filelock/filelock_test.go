package filelock

import (
	"errors"
	"path/filepath"
	"testing"
)

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	f, unlock, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("holder"); err != nil {
		t.Errorf("write to the held lock: %v", err)
	}
	// flock belongs to an open file: a second open, even in this process, finds it held.
	if _, _, err := TryLock(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("second TryLock: %v, want ErrHeld", err)
	}
	unlock()
	_, unlock, err = TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after unlock: %v", err)
	}
	unlock()
	release, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := TryLock(path); !errors.Is(err, ErrHeld) {
		t.Errorf("TryLock while Lock holds it: %v", err)
	}
	release()
}
