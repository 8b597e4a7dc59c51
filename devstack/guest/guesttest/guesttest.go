// Package guesttest holds what tests that boot the tiny guest share: finding the QEMU process of a
// libvirt domain and talking to the guest's serial console.
package guesttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/libvirtd"
	"github.com/d8virt/devstack/proc"
)

// QemuPidOf finds the QEMU process of the domain by its -name guest=<name> argument.
func QemuPidOf(t testing.TB, name string) int {
	t.Helper()
	pids, err := proc.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.HasPrefix(filepath.Base(args[0]), "qemu-system") && strings.Contains(string(b), "guest="+name+",") {
			return pid
		}
	}
	t.Fatalf("no QEMU process for domain %s", name)
	return 0
}

// ProcessExists reports whether pid runs. A zombie counts as gone: it has exited, only its parent
// has not reaped it yet. (proc.Alive, under the name the guest-booting tests know.)
func ProcessExists(pid int) bool { return proc.Alive(pid) }

// Console collects what the guest prints on its serial port.
type Console struct {
	conn io.ReadWriteCloser
	mu   sync.Mutex
	buf  strings.Builder
	seen int // WaitFor looks at output after the previous match only
	done chan struct{}
}

// DialConsole connects to the serial console socket at path.
func DialConsole(ctx context.Context, path string) (*Console, error) {
	var conn net.Conn
	var err error
	// QEMU creates the socket as it starts; retry briefly.
	for i := 0; i < 50; i++ {
		var d net.Dialer
		if conn, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("connect serial console %s: %w", path, err)
	}
	return NewConsole(conn), nil
}

// NewConsole starts collecting what arrives on conn, a connection to a serial console (a unix
// socket, or the console subresource's stream).
func NewConsole(conn io.ReadWriteCloser) *Console {
	c := &Console{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		b := make([]byte, 4096)
		for {
			n, err := conn.Read(b)
			c.mu.Lock()
			c.buf.Write(b[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Write types s on the console.
func (c *Console) Write(s string) error {
	if _, err := c.conn.Write([]byte(s)); err != nil {
		return fmt.Errorf("write to serial console: %w", err)
	}
	return nil
}

// WaitFor waits until re matches the output not yet consumed, and returns the submatches.
func (c *Console) WaitFor(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		rest := c.buf.String()[c.seen:]
		if loc := re.FindStringSubmatchIndex(rest); loc != nil {
			m := re.FindStringSubmatch(rest)
			c.seen += loc[1]
			c.mu.Unlock()
			return m, nil
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%q not seen on the serial console within %s", re, timeout)
		}
		select {
		case <-c.done:
			// The console closed (QEMU exited); one last look at what arrived.
			c.mu.Lock()
			rest := c.buf.String()[c.seen:]
			c.mu.Unlock()
			if m := re.FindStringSubmatch(rest); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("serial console closed before %q appeared", re)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Value types script, a shell line that prints name=[VALUE], and returns VALUE; the test fails
// (showing the console) when it does not come within timeout. The script must build the line
// with a $(...) or $VAR, so that the echo of the typed line (which has a $ between the brackets)
// is not taken for the answer.
func (c *Console) Value(t testing.TB, name, script string, timeout time.Duration) string {
	t.Helper()
	if err := c.Write(script + "\n"); err != nil {
		t.Fatal(err)
	}
	m, err := c.WaitFor(regexp.MustCompile(regexp.QuoteMeta(name)+`=\[([^]$]*)\]`), timeout)
	if err != nil {
		t.Fatalf("%s: %v\nconsole:\n%s", script, err, c)
	}
	return m[1]
}

// String is everything the console received so far.
func (c *Console) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Close disconnects from the console.
func (c *Console) Close() error {
	return c.conn.Close()
}

// Setup builds the guest image and starts a private libvirtd named instance for one test, which
// stops it at the end: tests neither depend on nor stop the instance a developer uses. It skips
// when not run as root, which libvirtd and QEMU need; CI runs as root.
func Setup(ctx context.Context, t testing.TB, instance string) (guest.Image, *libvirtd.Daemon) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: libvirtd and QEMU guests")
	}
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opts := libvirtd.Options{StateDir: libvirtd.StateDirFor(instance)}
	d, err := libvirtd.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := libvirtd.Stop(context.Background(), opts); err != nil {
			t.Errorf("stop libvirtd: %v", err)
		}
	})
	return img, d
}
