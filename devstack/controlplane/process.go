package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/d8virt/devstack/proc"
)

// process is one daemon of the stack, tracked by a pid file so that a later command can find it.
type process struct {
	name string
	bin  string
	args []string
	// netns runs the daemon inside a test host's network namespace.
	netns string
	// before, when set, prepares each start.
	before func(ctx context.Context) error
	// ready, when set, tells that a freshly started daemon serves.
	ready func(ctx context.Context) error
}

func (s *Stack) pidFile(name string) string { return filepath.Join(s.cfg.StateDir, "run", name+".pid") }
func (s *Stack) logFile(name string) string {
	return filepath.Join(s.cfg.StateDir, "logs", name+".log")
}

// running returns the pid of the process if it is alive and still runs the stack's binary; a pid
// that the kernel gave to some other program since is not ours.
func (s *Stack) running(p process) (int, bool) {
	pid := proc.ReadPidFile(s.pidFile(p.name))
	if pid == 0 {
		return 0, false
	}
	exe, err := proc.Exe(pid)
	// Inside a namespace, ip is the process until it has exec'ed the daemon.
	starting := p.netns != "" && filepath.Base(exe) == "ip"
	if err != nil || (exe != p.bin && !starting) || !proc.Alive(pid) {
		return 0, false
	}
	return pid, true
}

// start launches p in its own session, detached from the caller, with output appended to its log.
func (s *Stack) start(p process) error {
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(s.cfg.StateDir, d), 0o755); err != nil {
			return fmt.Errorf("create %s dir: %w", d, err)
		}
	}
	logf, err := os.OpenFile(s.logFile(p.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== %s starting %s\n", time.Now().Format(time.RFC3339), strings.Join(append([]string{p.bin}, p.args...), " "))
	cmd := exec.Command(p.bin, p.args...)
	if p.netns != "" {
		// ip execs the daemon in place, so the pid and /proc/PID/exe are the daemon's own.
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns, p.bin}, p.args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.cfg.StateDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	if err := proc.WritePidFile(s.pidFile(p.name), cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("record pid of %s: %w", p.name, err)
	}
	// Reap the child if this process lives long enough (otherwise init adopts it), and keep its
	// exit status for the error message of a failed start.
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.exits[p.name] = fmt.Sprintf("%v", err)
		s.mu.Unlock()
	}()
	return nil
}

// stop sends SIGTERM, then SIGKILL after the timeout, and waits until the process is gone.
func (s *Stack) stop(p process, timeout time.Duration) error {
	defer os.Remove(s.pidFile(p.name))
	pid, ok := s.running(p)
	if !ok {
		return nil
	}
	killed, err := proc.Stop(pid, timeout, func() bool { _, ok := s.running(p); return ok })
	if killed {
		s.logf("%s (pid %d) did not stop within %s, killed it", p.name, pid, timeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// StopComponent stops one component by its pid file, as Down would, whether or not the stack
// lists it: SIGTERM, then SIGKILL after the timeout.
func (s *Stack) StopComponent(c Component, timeout time.Duration) error {
	return s.stop(process{name: c.Name, bin: c.Bin, netns: c.NetNS}, timeout)
}

// tail returns the last lines of a process log, for error messages that explain a failed start.
func (s *Stack) tail(name string, lines int) string {
	b, err := os.ReadFile(s.logFile(name))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
