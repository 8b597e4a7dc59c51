package nodeagent

import (
	"os"
	"testing"
)

func TestSharePodsDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts")
	}
	dir := t.TempDir()
	undo, err := SharePodsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mounted, shared, err := mountPropagation(dir); err != nil || !mounted || !shared {
		t.Fatalf("after SharePodsDir: mounted %v, shared %v, %v", mounted, shared, err)
	}
	// A second agent start finds it shared and leaves it.
	again, err := SharePodsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := again(); err != nil {
		t.Fatal(err)
	}
	if mounted, _, _ := mountPropagation(dir); !mounted {
		t.Fatal("the second call's undo removed the first one's mount")
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if mounted, _, err := mountPropagation(dir); err != nil || mounted {
		t.Fatalf("after undo: mounted %v, %v", mounted, err)
	}
}
