// Package libvirtd runs the launcher's own virtlogd and libvirtd, as KubeVirt's launcher runs its
// own virtqemud: each launcher Pod has a libvirt of its own, so guests never share a daemon, and
// the daemons live and die with the Pod.
//
// The daemons use the fixed paths of a root libvirt (/etc/libvirt, /run/libvirt, /var/lib/libvirt,
// /var/log/libvirt, /var/cache/libvirt). The launcher's container has a mount namespace of its own
// with private, writable copies of those, so several launchers never collide. Start checks that
// no daemon already answers there: that would mean the launcher shares them with somebody else
// and would take over (and rewrite the configuration of) that libvirt.
package libvirtd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/libvirtconf"
)

// Paths of a root libvirt.
const (
	ConfDir  = "/etc/libvirt"
	RunDir   = "/run/libvirt"
	LibDir   = "/var/lib/libvirt"
	LogDir   = "/var/log/libvirt"
	CacheDir = "/var/cache/libvirt"
)

// Socket names in RunDir.
const (
	LibvirtdSocket = "libvirt-sock"
	VirtlogdSocket = "virtlogd-sock"
)

// URI reaches the daemon Start runs. The socket is named so that the client does not go looking
// for a modular daemon (virtqemud) first.
const URI = "qemu+unix:///system?socket=" + RunDir + "/" + LibvirtdSocket

// Options configure Start.
type Options struct {
	// Timeout bounds the wait for the daemons' sockets. Default 60s.
	Timeout time.Duration
	// HostUUID is libvirtd's host UUID. Default: a random one, so that two launchers on one
	// machine are two hosts to libvirt and may migrate guests between each other.
	HostUUID string
	// Output receives the daemons' stdout and stderr (their logs go to LogDir). Default os.Stderr.
	Output io.Writer
	Logger *slog.Logger
}

// Daemons are the running virtlogd and libvirtd.
type Daemons struct {
	virtlogd, libvirtd *exec.Cmd
	// exited are closed when the process ends (after Wait).
	virtlogdExited, libvirtdExited chan struct{}
	log                            *slog.Logger
}

// Start writes the configuration and starts virtlogd, then libvirtd, and waits until both listen.
func Start(ctx context.Context, opts Options) (*Daemons, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Output == nil {
		opts.Output = os.Stderr
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, bin := range []string{"libvirtd", "virtlogd"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("own libvirtd: %s not found: %w", bin, err)
		}
	}
	if err := checkNotRunning(RunDir); err != nil {
		return nil, err
	}
	for _, d := range []string{ConfDir, RunDir, LibDir, LogDir, CacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("own libvirtd: %w", err)
		}
	}
	if opts.HostUUID == "" {
		opts.HostUUID = uuid.NewString()
	}
	if err := libvirtconf.WriteOptions(ConfDir, libvirtconf.Options{HostUUID: opts.HostUUID}); err != nil {
		return nil, fmt.Errorf("own libvirtd: %w", err)
	}
	// Leftovers of a daemon that died with an earlier container of this Pod (checkNotRunning made
	// sure nothing answers) would make the new one refuse to start or the wait below succeed early.
	for _, f := range []string{LibvirtdSocket, LibvirtdSocket + "-ro", "libvirt-admin-sock", VirtlogdSocket, "virtlogd-admin-sock", "libvirtd.pid", "virtlogd.pid"} {
		if err := os.Remove(filepath.Join(RunDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("own libvirtd: remove stale %s: %w", f, err)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	d := &Daemons{log: log}
	var err error
	// Pid files in the private RunDir: the daemons' defaults (/run/virtlogd.pid, /run/libvirtd.pid)
	// are shared by every container on the machine, and a second launcher's daemons would find
	// them locked and exit.
	if d.virtlogd, d.virtlogdExited, err = spawn(opts.Output, "virtlogd", "-f", filepath.Join(ConfDir, libvirtconf.VirtlogdConf),
		"-p", filepath.Join(RunDir, "virtlogd.pid")); err != nil {
		return nil, err
	}
	// libvirtd hands QEMU's output to virtlogd, so virtlogd must listen before the first domain.
	if err := waitSocket(ctx, filepath.Join(RunDir, VirtlogdSocket), d.virtlogdExited, "virtlogd"); err != nil {
		d.Stop()
		return nil, err
	}
	if d.libvirtd, d.libvirtdExited, err = spawn(opts.Output, "libvirtd", "-f", filepath.Join(ConfDir, libvirtconf.LibvirtdConf),
		"-p", filepath.Join(RunDir, "libvirtd.pid")); err != nil {
		d.Stop()
		return nil, err
	}
	if err := waitSocket(ctx, filepath.Join(RunDir, LibvirtdSocket), d.libvirtdExited, "libvirtd"); err != nil {
		d.Stop()
		return nil, err
	}
	log.Info("own libvirtd started", "virtlogd", d.virtlogd.Process.Pid, "libvirtd", d.libvirtd.Process.Pid, "uri", URI, "hostUUID", opts.HostUUID)
	return d, nil
}

// checkNotRunning fails if a daemon answers on one of the sockets in runDir.
func checkNotRunning(runDir string) error {
	for _, name := range []string{LibvirtdSocket, VirtlogdSocket} {
		p := filepath.Join(runDir, name)
		c, err := net.DialTimeout("unix", p, 2*time.Second)
		if err != nil {
			// Missing, or a stale file nobody listens on: either way free to use.
			continue
		}
		c.Close()
		return fmt.Errorf("own libvirtd: a daemon already answers on %s: the launcher starts its own libvirtd only in a mount namespace with a private %s (as a Pod's container has)", p, runDir)
	}
	return nil
}

// spawn starts a daemon in the foreground, as a child of the launcher.
func spawn(out io.Writer, name string, args ...string) (*exec.Cmd, chan struct{}, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = "/"
	cmd.Stdout = out
	cmd.Stderr = out
	// Should the launcher die without stopping them, the daemons follow it rather than linger. In
	// a process group of their own, a Ctrl-C meant for a launcher run by hand reaches only the
	// launcher, which stops the guest before the daemons.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("own libvirtd: start %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit shows through exited; Stop and the socket wait report it
		close(exited)
	}()
	return cmd, exited, nil
}

// waitSocket waits until something accepts connections on path, failing early if the daemon that
// should listen there exited.
func waitSocket(ctx context.Context, path string, exited <-chan struct{}, name string) error {
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("own libvirtd: %s exited during start-up; see %s", name, filepath.Join(LogDir, name+".log"))
		case <-ctx.Done():
			return fmt.Errorf("own libvirtd: %s not listening on %s: %w (last error: %v)", name, path, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop ends libvirtd, kills any QEMU it left behind, and ends virtlogd. The launcher calls it
// after its domain is gone; libvirtd does not stop guests when it exits, so a QEMU that survived
// (the launcher lost libvirtd, say) is killed here rather than left running in the Pod.
func (d *Daemons) Stop() {
	if d.libvirtd != nil {
		terminate(d.libvirtd, d.libvirtdExited, 15*time.Second, d.log)
	}
	d.killLeftoverQEMU()
	if d.virtlogd != nil {
		terminate(d.virtlogd, d.virtlogdExited, 10*time.Second, d.log)
	}
}

// killLeftoverQEMU kills the QEMU processes named by libvirt's pid files of running domains.
func (d *Daemons) killLeftoverQEMU() {
	files, _ := filepath.Glob(filepath.Join(RunDir, "qemu", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "qemu") {
			continue // gone, or the pid was reused by something else
		}
		d.log.Warn("killing a QEMU libvirtd left behind", "pid", pid, "pidfile", f)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			d.log.Error("kill leftover QEMU", "pid", pid, "err", err)
		}
	}
}

// terminate sends SIGTERM, then SIGKILL after grace, and waits for the process to end.
func terminate(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration, log *slog.Logger) {
	name := filepath.Base(cmd.Path)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		log.Warn("signal daemon", "daemon", name, "err", err)
	}
	select {
	case <-exited:
		return
	case <-time.After(grace):
	}
	log.Warn("daemon ignored SIGTERM; killing it", "daemon", name, "grace", grace)
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		log.Error("kill daemon", "daemon", name, "err", err)
	}
	<-exited
}
