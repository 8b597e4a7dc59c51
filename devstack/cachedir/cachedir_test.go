package cachedir

import (
	"path/filepath"
	"testing"
)

func TestRoot(t *testing.T) {
	for _, tc := range []struct {
		name, cache, xdg, home, want string
	}{
		{"D8V_CACHE wins", "/c", "/x", "/h", "/c"},
		{"XDG_CACHE_HOME", "", "/x", "/h", "/x/d8-virtualization"},
		{"home", "", "", "/h", "/h/.cache/d8-virtualization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("D8V_CACHE", tc.cache)
			t.Setenv("XDG_CACHE_HOME", tc.xdg)
			t.Setenv("HOME", tc.home)
			if got := Root(); got != filepath.Clean(tc.want) {
				t.Errorf("Root() = %q, want %q", got, tc.want)
			}
		})
	}
}
