package libvirtd

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckNotRunning: a live daemon on the sockets means the libvirt directories are not private;
// files nobody listens on are leftovers it may replace.
func TestCheckNotRunning(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr bool
	}{
		{name: "nothing there"},
		{name: "stale libvirtd socket", setup: func(t *testing.T, dir string) { staleSocket(t, filepath.Join(dir, LibvirtdSocket)) }},
		{name: "stale plain file", setup: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, VirtlogdSocket), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "live libvirtd", setup: func(t *testing.T, dir string) { liveSocket(t, filepath.Join(dir, LibvirtdSocket)) }, wantErr: true},
		{name: "live virtlogd", setup: func(t *testing.T, dir string) { liveSocket(t, filepath.Join(dir, VirtlogdSocket)) }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			err := checkNotRunning(dir)
			if (err != nil) != tt.wantErr {
				t.Fatalf("checkNotRunning = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "mount namespace") {
				t.Errorf("error %q does not tell what the launcher needs", err)
			}
		})
	}
}

func liveSocket(t *testing.T, path string) {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func staleSocket(t *testing.T, path string) {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}
