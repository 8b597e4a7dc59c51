package libvirtd

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/proc"
)

func TestStartStop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: libvirtd as root in a mount namespace")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := Options{StateDir: t.TempDir()}
	t.Cleanup(func() { Stop(context.Background(), opts) })

	d, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	libvirtdPid := alivePid(opts.StateDir, "libvirtd")
	virtlogdPid := alivePid(opts.StateDir, "virtlogd")
	if libvirtdPid == 0 || virtlogdPid == 0 {
		t.Fatalf("daemons not running after Start: libvirtd %d, virtlogd %d", libvirtdPid, virtlogdPid)
	}

	// Idempotent: a second Start reuses the running daemons.
	d2, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d2.URI != d.URI || alivePid(opts.StateDir, "libvirtd") != libvirtdPid {
		t.Errorf("second Start did not reuse the instance: %s (pid %d), want %s (pid %d)",
			d2.URI, alivePid(opts.StateDir, "libvirtd"), d.URI, libvirtdPid)
	}

	// The instance has the private QEMU configuration and answers a client outside the namespace.
	out, err := exec.CommandContext(ctx, "virsh", "-q", "-c", d.URI, "capabilities").CombinedOutput()
	if err != nil {
		t.Fatalf("virsh capabilities: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "<domain type='qemu'") {
		t.Errorf("no TCG (type qemu) domains in the capabilities:\n%s", out)
	}

	// The socket lives in the state dir, where clients outside the namespace find it.
	if _, err := os.Stat(d.Socket); err != nil {
		t.Errorf("socket not in the state dir: %v", err)
	}

	if err := Stop(ctx, opts); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{libvirtdPid, virtlogdPid} {
		if proc.Alive(pid) {
			t.Errorf("process %d still runs after Stop", pid)
		}
	}
	// Stopping a stopped instance is fine.
	if err := Stop(ctx, opts); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
