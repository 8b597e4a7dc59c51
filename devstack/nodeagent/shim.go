package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/d8virt/devstack/proc"
)

// runShim supervises one container attempt; see the comment on ShimCommand.
func runShim(ctrDir string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "node-agent container-shim:", err)
		return 1
	}
	var spec InitSpec
	if err := readJSON(filepath.Join(ctrDir, initFile), &spec); err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("become subreaper: %w", err))
	}
	logf, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	sigc := make(chan os.Signal, 64)
	signal.Notify(sigc, syscall.SIGCHLD)

	started := time.Now()
	exitInfo := ExitInfo{Attempt: spec.Attempt, StartedAt: started}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"node-agent", InitCommand, filepath.Join(ctrDir, initFile)}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{devnull.Fd(), logf.Fd(), logf.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		exitInfo.ExitCode = startErrorExitCode
		exitInfo.StartError = err.Error()
		exitInfo.FinishedAt = time.Now()
		if werr := writeJSON(filepath.Join(ctrDir, exitFile), exitInfo); werr != nil {
			return fail(werr)
		}
		return 0
	}
	devnull.Close()
	self, _ := proc.Identify(os.Getpid())
	child, _ := proc.Identify(pid)
	_ = writeJSON(filepath.Join(ctrDir, runningFile), RunningInfo{
		Attempt: spec.Attempt, Pid: pid, StartTicks: child.StartTicks,
		ShimPid: os.Getpid(), ShimStartTicks: self.StartTicks, StartedAt: started,
	})

	var status syscall.WaitStatus
	for done := false; !done; {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if p <= 0 || err != nil {
				break
			}
			if p == pid {
				status, done = ws, true
			}
		}
		if !done {
			select {
			case <-sigc:
			case <-time.After(time.Second):
			}
		}
	}
	exitInfo.FinishedAt = time.Now()
	killDescendants()

	switch {
	case status.Exited():
		exitInfo.ExitCode = int32(status.ExitStatus())
	case status.Signaled():
		exitInfo.Signal = int32(status.Signal())
		exitInfo.ExitCode = 128 + int32(status.Signal())
	}
	if b, err := os.ReadFile(filepath.Join(ctrDir, startErrorFile)); err == nil {
		exitInfo.StartError = strings.TrimSpace(string(b))
	}
	if err := writeJSON(filepath.Join(ctrDir, exitFile), exitInfo); err != nil {
		return fail(err)
	}
	return 0
}

// killDescendants kills every process left below the shim and reaps it, until none is left.
func killDescendants() {
	self := os.Getpid()
	for round := 0; round < 50; round++ {
		pids := descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err != nil && errors.Is(err, syscall.ECHILD) {
				break
			}
			if p <= 0 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// descendants lists the processes below pid, from the parent links in /proc.
func descendants(pid int) []int {
	all, err := proc.List()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, p := range all {
		st, err := proc.ReadStat(p)
		if err != nil || st.Exited() {
			continue // zombies are reaped by their parent or, once it is gone, by the shim
		}
		children[st.Parent] = append(children[st.Parent], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
