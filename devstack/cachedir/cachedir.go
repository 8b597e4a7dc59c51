// Package cachedir names the machine-wide cache of the local stack: built binaries, images,
// stack state and libvirt instances all live below Root.
package cachedir

import (
	"os"
	"path/filepath"
)

// Root is D8V_CACHE, or $XDG_CACHE_HOME/d8-virtualization, or ~/.cache/d8-virtualization (the
// temporary directory stands in for a home that cannot be found).
func Root() string {
	if v := os.Getenv("D8V_CACHE"); v != "" {
		return v
	}
	if v := os.Getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "d8-virtualization")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "d8-virtualization")
}
