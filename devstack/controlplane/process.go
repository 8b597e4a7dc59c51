package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/d8virt/devstack/proc"
)

// Each daemon of the stack has a pid file, so that a later command finds it, and a log.
func (s *Stack) pidFile(name string) string { return filepath.Join(s.cfg.StateDir, "run", name+".pid") }
func (s *Stack) logFile(name string) string {
	return filepath.Join(s.cfg.StateDir, "logs", name+".log")
}

// running returns the pid of the process if it is alive and still runs the stack's binary; a pid
// that the kernel gave to some other program since is not ours.
func (s *Stack) running(p Component) (int, bool) {
	pid := proc.ReadPidFile(s.pidFile(p.Name))
	if pid == 0 {
		return 0, false
	}
	exe, err := proc.Exe(pid)
	// Inside a namespace, ip is the process until it has exec'ed the daemon.
	starting := p.NetNS != "" && filepath.Base(exe) == "ip"
	if err != nil || (exe != p.Bin && !starting) || !proc.Alive(pid) {
		return 0, false
	}
	return pid, true
}

// start launches p in its own session, detached from the caller, with output appended to its log.
func (s *Stack) start(p Component) error {
	for _, d := range []string{"run", "logs"} {
		if err := os.MkdirAll(filepath.Join(s.cfg.StateDir, d), 0o755); err != nil {
			return fmt.Errorf("create %s dir: %w", d, err)
		}
	}
	logf, err := os.OpenFile(s.logFile(p.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== %s starting %s\n", time.Now().Format(time.RFC3339), strings.Join(append([]string{p.Bin}, p.Args...), " "))
	cmd := exec.Command(p.Bin, p.Args...)
	if p.NetNS != "" {
		// ip execs the daemon in place, so the pid and /proc/PID/exe are the daemon's own.
		cmd = exec.Command("ip", append([]string{"netns", "exec", p.NetNS, p.Bin}, p.Args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.cfg.StateDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	if err := proc.WritePidFile(s.pidFile(p.Name), cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("record pid of %s: %w", p.Name, err)
	}
	// Reap the child if this process lives long enough (otherwise init adopts it), and keep its
	// exit status for the error message of a failed start.
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.exits[p.Name] = fmt.Sprintf("%v", err)
		s.mu.Unlock()
	}()
	return nil
}

// stop sends SIGTERM, then SIGKILL after the timeout, and waits until the process is gone.
func (s *Stack) stop(p Component, timeout time.Duration) error {
	defer os.Remove(s.pidFile(p.Name))
	pid, ok := s.running(p)
	if !ok {
		return nil
	}
	killed, err := proc.Stop(pid, timeout, func() bool { _, ok := s.running(p); return ok })
	if killed {
		s.logf("%s (pid %d) did not stop within %s, killed it", p.Name, pid, timeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}

// StopComponent stops one component by its pid file, as Down would, whether or not the stack
// lists it: SIGTERM, then SIGKILL after the timeout.
func (s *Stack) StopComponent(c Component, timeout time.Duration) error {
	return s.stop(c, timeout)
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
