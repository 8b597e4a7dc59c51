package containerdisk

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiskFile(t *testing.T) {
	root := t.TempDir()
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("disk/disk.qcow2")
	write("two/a.img")
	write("two/b.img")
	write("custom/os.img")
	if err := os.MkdirAll(filepath.Join(root, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want, err string
	}{
		{name: "default: the one file under /disk", want: "disk/disk.qcow2"},
		{name: "a file", path: "/custom/os.img", want: "custom/os.img"},
		{name: "a directory with one file", path: "/custom", want: "custom/os.img"},
		{name: "cannot leave the root", path: "/../../custom/os.img", want: "custom/os.img"},
		{name: "two files", path: "/two", err: "exactly one disk file there, it holds 2 (a.img, b.img)"},
		{name: "no file", path: "/empty", err: "it holds 0"},
		{name: "missing", path: "/nope", err: "containerDisk path /nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DiskFile(root, c.path)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != filepath.Join(root, c.want) {
				t.Fatalf("DiskFile = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestServeFetch: the launcher's side gets a descriptor of the server's disk, readable after the
// server is gone, and every connection gets one.
func TestServeFetch(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(disk, []byte("QFI\xfbdata"), 0o444); err != nil {
		t.Fatal(err)
	}
	f, l, sock := openAndListen(t, disk, dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Serve(ctx, l, f) }()
	for range 2 {
		fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := Fetch(fctx, sock)
		fcancel()
		if err != nil {
			t.Fatal(err)
		}
		if got.Name() != "disk.qcow2" {
			t.Errorf("name = %q", got.Name())
		}
		// Another process opens it by ProcPath; so does this one.
		b, err := os.ReadFile(ProcPath(got))
		if err != nil || string(b) != "QFI\xfbdata" {
			t.Errorf("read %s = %q, %v", ProcPath(got), b, err)
		}
		got.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := Fetch(context.Background(), sock); err == nil {
		t.Fatal("Fetch after the server stopped succeeded")
	}
}

// TestServeEndsWithItsSocket: the launcher removes the socket when it ends; the server ends too.
func TestServeEndsWithItsSocket(t *testing.T) {
	dir := t.TempDir()
	f, l, sock := openAndListen(t, dir, dir)
	// The listener would unlink the file itself when closed.
	l.SetUnlinkOnClose(false)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), l, f) }()
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * socketPoll):
		t.Fatal("Serve still runs after its socket was removed")
	}
}

// openAndListen opens the file a server hands out (closed when the test ends) and listens on
// the socket of volume "root" in dir.
func openAndListen(t *testing.T, file, dir string) (*os.File, *net.UnixListener, string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	sock := Socket(dir, "root")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return f, l, sock
}
