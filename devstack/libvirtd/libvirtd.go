// Package libvirtd starts and stops a private libvirtd (with its virtlogd) for the local stack and
// the tests. There is no systemd here, so nothing else would start them.
//
// Each instance lives in its own state directory and its own mount namespace: libvirt running as
// root insists on /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/log/libvirt and
// /var/cache/libvirt, so the daemons see those paths bind-mounted from the state directory. That
// gives the instance its own qemu.conf (QEMU as root, no relabelling, no cgroups), its own sockets
// and logs, leaves a system libvirtd (if any) alone, and lets several instances (say, one per node
// or per launcher) run side by side. The client side needs no namespace: it talks to the socket at
// <state>/run/libvirt-sock through the URI the package returns.
//
// The daemons are managed with the virsh client rather than the Go bindings so that this package
// builds without cgo.
package libvirtd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/d8virt/devstack/cachedir"
	"github.com/d8virt/devstack/filelock"
	"github.com/d8virt/devstack/proc"
)

// Options select an instance. The zero value is the default instance.
type Options struct {
	// StateDir holds the instance's configuration, sockets, pid files, logs and libvirt state.
	// Default: DefaultStateDir().
	StateDir string
	// Timeout bounds how long Start waits for the daemon to answer; the first start also probes
	// QEMU's capabilities, which takes a few seconds. Default: 90s.
	Timeout time.Duration
}

// Daemon is a running instance.
type Daemon struct {
	// StateDir is the instance's state directory.
	StateDir string
	// URI is the connection URI for virsh and libvirt.NewConnect.
	URI string
	// Socket is the read-write libvirtd socket the URI points at.
	Socket string
	// LogDir holds libvirtd.log, virtlogd.log and, under qemu/, each domain's QEMU log.
	LogDir string
}

// The libvirt directories the daemons see, each mapped to a subdirectory of the state directory.
var binds = []struct{ sub, target string }{
	{"etc", "/etc/libvirt"},
	{"run", "/run/libvirt"},
	{"lib", "/var/lib/libvirt"},
	{"log", "/var/log/libvirt"},
	{"cache", "/var/cache/libvirt"},
}

// DefaultStateDir is the state directory of the instance the local stack uses: StateDirFor("default").
func DefaultStateDir() string {
	return StateDirFor("default")
}

// StateDirFor is the state directory of a named instance, <cache>/libvirt/<name>, where <cache> is
// D8V_CACHE, $XDG_CACHE_HOME/d8-virtualization or ~/.cache/d8-virtualization, as for the rest of
// the stack. Tests use their own names so that they never stop the instance a developer works with.
func StateDirFor(name string) string {
	return filepath.Join(cachedir.Root(), "libvirt", name)
}

func (o Options) withDefaults() (Options, error) {
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir()
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return o, fmt.Errorf("state dir %s: %w", o.StateDir, err)
	}
	o.StateDir = abs
	if o.Timeout <= 0 {
		o.Timeout = 90 * time.Second
	}
	return o, nil
}

func daemonFor(state string) *Daemon {
	sock := filepath.Join(state, "run", "libvirt-sock")
	return &Daemon{
		StateDir: state,
		URI:      "qemu+unix:///system?socket=" + sock,
		Socket:   sock,
		LogDir:   filepath.Join(state, "log"),
	}
}

// Start starts virtlogd and libvirtd for the instance unless they already run, and waits until
// libvirtd answers. Safe to call from several processes at once.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("libvirtd: must run as root (QEMU guests, mount namespace)")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	for _, bin := range []string{"libvirtd", "virtlogd", "virsh", "unshare", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("libvirtd: %s not found (run hack/install-deps.sh): %w", bin, err)
		}
	}
	d := daemonFor(opts.StateDir)
	unlock, err := filelock.Lock(filepath.Join(opts.StateDir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	for _, b := range binds {
		if err := os.MkdirAll(filepath.Join(opts.StateDir, b.sub), 0o755); err != nil {
			return nil, fmt.Errorf("libvirtd: state dir: %w", err)
		}
	}
	if err := writeConfig(opts.StateDir); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	if pid := alivePid(opts.StateDir, "libvirtd"); pid > 0 {
		// Already running, possibly still starting up in another process: wait for it.
		if err := waitReady(ctx, d, pid); err != nil {
			return nil, err
		}
		return d, nil
	}
	// A virtlogd without its libvirtd is left over from a crash; start the pair afresh so they
	// share one mount namespace.
	if pid := alivePid(opts.StateDir, "virtlogd"); pid > 0 {
		if err := terminate(pid, 10*time.Second); err != nil {
			return nil, err
		}
	}
	// Stale sockets would make the readiness check talk to nobody for a while.
	for _, f := range []string{"libvirt-sock", "libvirt-sock-ro", "libvirt-admin-sock", "virtlogd-sock", "virtlogd-admin-sock", "libvirtd.pid", "virtlogd.pid"} {
		os.Remove(filepath.Join(opts.StateDir, "run", f))
	}

	if err := launch(ctx, opts.StateDir); err != nil {
		return nil, err
	}
	pid := alivePid(opts.StateDir, "libvirtd")
	if pid == 0 {
		return nil, fmt.Errorf("libvirtd: did not stay up; see %s", filepath.Join(d.LogDir, "libvirtd.log"))
	}
	if err := waitReady(ctx, d, pid); err != nil {
		return nil, err
	}
	return d, nil
}

// launch runs both daemons in a new mount namespace. Propagation is "slave" so that mounts made
// on the host later (pod volumes, network namespace files) still reach QEMU, while the libvirt
// bind mounts stay private to the instance.
func launch(ctx context.Context, state string) error {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, b := range binds {
		fmt.Fprintf(&script, "mkdir -p %s\nmount --bind %s %s\n", b.target, shellQuote(filepath.Join(state, b.sub)), b.target)
	}
	// -d makes each daemon fork, write its pid file and return once it is initialised; the
	// namespace lives on in them after this shell exits.
	script.WriteString("virtlogd -d -f /etc/libvirt/virtlogd.conf -p /run/libvirt/virtlogd.pid\n")
	script.WriteString("libvirtd -d -f /etc/libvirt/libvirtd.conf -p /run/libvirt/libvirtd.pid\n")

	out, err := os.OpenFile(filepath.Join(state, "log", "daemons.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("libvirtd: open daemon output: %w", err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "slave", "--", "/bin/sh", "-c", script.String())
	cmd.Dir = "/"
	cmd.Stdout = out
	cmd.Stderr = out
	// Own session: a Ctrl-C aimed at `go test` or make must not reach the daemons through the
	// terminal's process group; Stop ends them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("libvirtd: start daemons (output in %s): %w", out.Name(), err)
	}
	return nil
}

// waitReady polls the socket until libvirtd answers, failing early if the daemon died.
func waitReady(ctx context.Context, d *Daemon, pid int) error {
	var last error
	for {
		if !proc.Alive(pid) {
			return fmt.Errorf("libvirtd: exited during start-up; see %s", filepath.Join(d.LogDir, "libvirtd.log"))
		}
		if last = ping(ctx, d.URI); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("libvirtd: not answering on %s: %w (last error: %v)", d.Socket, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, uri string) error {
	if _, err := virsh(ctx, uri, "uri"); err != nil {
		return err
	}
	return nil
}

func virsh(ctx context.Context, uri string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-q", "-c", uri}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Stop destroys the instance's running domains, stops libvirtd and virtlogd, and kills any process
// left in their mount namespace (a QEMU libvirtd lost track of), so nothing of the instance
// survives. Stopping an instance that does not run is not an error.
func Stop(ctx context.Context, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if _, err := os.Stat(opts.StateDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, err := filelock.Lock(filepath.Join(opts.StateDir, "lock"))
	if err != nil {
		return err
	}
	defer unlock()
	d := daemonFor(opts.StateDir)

	var errs []error
	var ns string
	if pid := alivePid(opts.StateDir, "libvirtd"); pid > 0 {
		ns, _ = proc.Namespace(pid, "mnt")
		if ping(ctx, d.URI) == nil {
			out, err := virsh(ctx, d.URI, "list", "--name", "--state-running", "--state-paused", "--state-other")
			if err != nil {
				errs = append(errs, err)
			}
			for _, name := range strings.Fields(out) {
				if _, err := virsh(ctx, d.URI, "destroy", name); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := terminate(pid, 20*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if pid := alivePid(opts.StateDir, "virtlogd"); pid > 0 {
		if ns == "" {
			ns, _ = proc.Namespace(pid, "mnt")
		}
		if err := terminate(pid, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if ns != "" {
		if err := killNamespace(ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range []string{"libvirtd.pid", "virtlogd.pid"} {
		os.Remove(filepath.Join(opts.StateDir, "run", f))
	}
	return errors.Join(errs...)
}

// killNamespace SIGKILLs every process whose mount namespace is ns. Our own namespace is never
// the instance's, so this cannot hit the caller.
func killNamespace(ns string) error {
	self, _ := proc.Namespace(os.Getpid(), "mnt")
	if ns == self {
		return nil
	}
	pids, err := proc.InNamespace("mnt", ns)
	if err != nil {
		return fmt.Errorf("libvirtd: list processes: %w", err)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for proc.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if proc.Alive(pid) {
			return fmt.Errorf("libvirtd: process %d of the instance survived SIGKILL", pid)
		}
	}
	return nil
}

// alivePid returns the pid from the instance's pid file for daemon when that process still runs
// and really is that daemon (a pid file can outlive a reboot of the machine or container).
func alivePid(state, daemon string) int {
	pid := proc.ReadPidFile(filepath.Join(state, "run", daemon+".pid"))
	if pid == 0 {
		return 0
	}
	if comm, err := proc.Comm(pid); err != nil || comm != daemon {
		return 0
	}
	return pid
}

// terminate sends SIGTERM, then SIGKILL after grace.
func terminate(pid int, grace time.Duration) error {
	if _, err := proc.Stop(pid, grace, nil); err != nil {
		return fmt.Errorf("libvirtd: %w", err)
	}
	return nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
