package unixsock

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDialLongPath(t *testing.T) {
	for _, depth := range []int{1, 12} {
		dir := t.TempDir()
		for i := 0; i < depth; i++ {
			dir = filepath.Join(dir, strings.Repeat("d", 12))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Listen through a short relative path: the listener has the same limit.
		wd, _ := os.Getwd()
		if err := os.Chdir(dir); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", "s.sock")
		_ = os.Chdir(wd)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := l.Accept()
			if err == nil {
				_, _ = c.Write([]byte("ok"))
				c.Close()
			}
		}()
		path := filepath.Join(dir, "s.sock")
		conn, err := Dial(context.Background(), path)
		if err != nil {
			t.Fatalf("dial %d-byte path: %v", len(path), err)
		}
		b := make([]byte, 2)
		if _, err := conn.Read(b); err != nil || string(b) != "ok" {
			t.Fatalf("read %q, %v", b, err)
		}
		conn.Close()
		l.Close()
	}
}
