// Package virtlauncher tests virt-launcher on the tiny guest, as root with real QEMU under TCG.
// The binary, built from kubevirt-core/cmd/virt-launcher, runs as a Pod's compute container does
// (in a network namespace with eth0 and in a mount namespace of its own, where it starts its own
// libvirtd) and is driven only through its command socket, as virt-handler drives it. The domain
// manager (pkg/virtlauncher/launcher) is driven directly against a private libvirtd.
package virtlauncher

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	// The pod network binding's test runs its launcher side in a child of the test binary.
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(child(cfg))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// launcherBinary builds virt-launcher once for the package's tests and returns its path.
func launcherBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// The repository root, from devstack/test/virt-launcher.
		repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
		if err != nil {
			buildErr = err
			return
		}
		if binDir, err = os.MkdirTemp("", "virt-launcher-test-bin-"); err != nil {
			buildErr = err
			return
		}
		build := exec.Command("go", "build", "-o", binDir+"/", "./kubevirt-core/cmd/virt-launcher")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build virt-launcher: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "virt-launcher")
}
