package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	b, err := os.ReadFile(s.pidFile(p.name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	// The exe link, unlike cmdline, is already set while the kernel is still loading the binary.
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	exe = strings.TrimSuffix(exe, " (deleted)")
	// Inside a namespace, ip is the process until it has exec'ed the daemon.
	starting := p.netns != "" && filepath.Base(exe) == "ip"
	if err != nil || (exe != p.bin && !starting) {
		return 0, false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && isZombie(stat) {
		return 0, false
	}
	return pid, true
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
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
	if err := os.WriteFile(s.pidFile(p.name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
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
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s (pid %d): %w", p.name, pid, err)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, ok := s.running(p); !ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.logf("%s (pid %d) did not stop within %s, killing it", p.name, pid, timeout)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 50; i++ {
		if _, ok := s.running(p); !ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s (pid %d) survived SIGKILL", p.name, pid)
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
