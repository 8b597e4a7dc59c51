package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/d8virt/devstack/proc"
)

// Each daemon of the stack has a record (proc.Record: pid, start time and binary), so that a later
// command finds it, and a log. The record keeps the name of a pid file, run/<name>.pid.
func (s *Stack) pidFile(name string) string { return filepath.Join(s.cfg.StateDir, "run", name+".pid") }
func (s *Stack) logFile(name string) string {
	return filepath.Join(s.cfg.StateDir, "logs", name+".log")
}

// running returns the record of p's process if that process still runs. The record alone decides:
// whichever checkout, with whatever binaries, asks, the process started for the stack is found,
// and a pid the kernel gave to some other program since is not it.
func (s *Stack) running(p Component) (proc.Record, bool) {
	rec, err := proc.ReadRecord(s.pidFile(p.Name))
	if err != nil {
		return proc.Record{}, false
	}
	if rec.StartTicks == 0 {
		return s.adoptPidFile(p, rec.Pid)
	}
	return rec, rec.Alive()
}

// adoptPidFile reads the plain pid file of a stack started before daemons had records: the pid is
// p's if it runs p's binary (or ip, which execs it in a namespace), as was decided then. An adopted
// process gets its record, so the next command needs no guess.
func (s *Stack) adoptPidFile(p Component, pid int) (proc.Record, bool) {
	exe, err := proc.Exe(pid)
	starting := p.NetNS != "" && filepath.Base(exe) == "ip"
	if err != nil || (exe != p.Bin && !starting) {
		return proc.Record{}, false
	}
	id, err := proc.Identify(pid)
	if err != nil {
		return proc.Record{}, false
	}
	rec := proc.Record{Identity: id, Bin: p.Bin}
	if err := proc.WriteRecord(s.pidFile(p.Name), rec); err != nil {
		s.logf("%s: %v", p.Name, err)
	}
	return rec, true
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
	// The daemon outlives this process: it must not hold what this process was handed (a
	// flock(1) lock above all).
	if err := proc.CloseInheritedOnExec(); err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	// ip execs the daemon in place: the pid and the start time stay the daemon's.
	rec, err := proc.Start(cmd.Process.Pid, p.Bin)
	if err == nil {
		err = proc.WriteRecord(s.pidFile(p.Name), rec)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("record %s: %w", p.Name, err)
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

// stop sends the process its record names SIGTERM, then SIGKILL after the timeout, and waits
// until it is gone; the record goes with it.
func (s *Stack) stop(p Component, timeout time.Duration) error {
	rec, ok := s.running(p)
	if !ok {
		return removeMissing(s.pidFile(p.Name))
	}
	killed, err := proc.Stop(rec.Pid, timeout, rec.Alive)
	if killed {
		s.logf("%s (pid %d) did not stop within %s, killed it", p.Name, rec.Pid, timeout)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return removeMissing(s.pidFile(p.Name))
}

func removeMissing(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// StopComponent stops one component by its record, as Down would, whether or not the stack lists
// it: SIGTERM, then SIGKILL after the timeout. c.Bin only matters for a plain pid file of an
// older stack.
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
