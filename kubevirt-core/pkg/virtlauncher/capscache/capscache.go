// Package capscache copies libvirt's QEMU capabilities cache between a libvirtd's cache directory
// and the node's shared one (launcherapi.QEMUCapsHostDir): the node labeller saves its daemon's
// files there, a launcher seeds its own daemon's cache from there before the daemon starts.
package capscache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a libvirtd's QEMU capabilities cache below its cache directory (/var/cache/libvirt):
// one XML file per emulator binary.
func Dir(cacheDir string) string { return filepath.Join(cacheDir, "qemu", "capabilities") }

// Copy copies the XML files of from into to (created if missing) and returns how many. Each file
// is written under a temporary name and renamed, so a daemon or another copier never reads half
// of one. A from that does not exist holds nothing to copy.
func Copy(from, to string) (int, error) {
	entries, err := os.ReadDir(from)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("QEMU capabilities cache: %w", err)
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".xml") {
			continue
		}
		if n == 0 {
			if err := os.MkdirAll(to, 0o755); err != nil {
				return 0, fmt.Errorf("QEMU capabilities cache: %w", err)
			}
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return n, fmt.Errorf("QEMU capabilities cache: %w", err)
		}
		n++
	}
	return n, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".copy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	// Capabilities are no secret; the launchers that read the node's copy may run as another user.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
