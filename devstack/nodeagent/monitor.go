package nodeagent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/devstack/proc"
)

// monitor waits for an attempt to end and posts its outcome. cmd is set for a shim this agent
// started; an adopted one (agent restart) is watched by pid.
func (r *podRuntime) monitor(ctx context.Context, c *ctr, attempt int, cmd *exec.Cmd, shim proc.Identity) {
	exited := make(chan struct{})
	if cmd != nil {
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
	}
	runningPath := filepath.Join(c.dir, runningFile)
	knowPid := false
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		if !knowPid {
			var ri RunningInfo
			if err := readJSON(runningPath, &ri); err == nil && ri.Attempt == attempt {
				knowPid = true
				r.post(func() {
					if c.running != nil && c.running.Attempt == attempt {
						*c.running = ri // the shim's start time, which an agent restart recovers too
					}
				})
			}
		}
		if cmd == nil && n%10 == 0 && !shim.Alive() {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-exited:
		case <-tick.C:
			continue
		}
		break
	}
	var info ExitInfo
	if err := readJSON(filepath.Join(c.dir, exitFile), &info); err != nil || info.Attempt != attempt {
		info = ExitInfo{Attempt: attempt, ExitCode: 137, FinishedAt: time.Now(), Reason: "ContainerStatusUnknown",
			Message: "the container's supervisor ended without recording an exit status"}
		var ri RunningInfo
		if readJSON(runningPath, &ri) == nil && ri.Attempt == attempt {
			info.StartedAt = ri.StartedAt
			if ri.process().Alive() {
				_ = syscall.Kill(-ri.Pid, syscall.SIGKILL)
			}
		}
	}
	r.post(func() { r.onExit(c, info) })
}

// onExit records an attempt's end and schedules the restart, if any, with kubelet's back-off: the
// first restart is immediate, then 10s doubling up to 5m, reset after a run longer than twice that.
func (r *podRuntime) onExit(c *ctr, info ExitInfo) {
	if info.Attempt != c.rec.Attempt {
		return
	}
	c.running = nil
	c.ready = false
	if c.probeCancel != nil {
		c.probeCancel()
		c.probeCancel = nil
	}
	spec := r.specOf(r.currentPod(), c)
	if info.StartError != "" {
		if info.Reason == "" {
			info.Reason = "StartError"
		}
		if info.Message == "" {
			info.Message = info.StartError
		}
	}
	if info.Message == "" {
		info.Message = readTerminationMessage(filepath.Join(c.dir, termLogFile))
		if info.Message == "" && info.ExitCode != 0 && spec != nil && spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			info.Message = tailFile(r.p.layout.LogFile(r.uid, c.name), 80, 2048)
		}
	}
	c.rec.PrevExit, c.rec.Exit = c.rec.Exit, &info
	c.rec.Running = false
	initial, maxB := r.p.cfg.InitialBackoff, r.p.cfg.MaxBackoff
	if info.FinishedAt.Sub(info.StartedAt) > 2*maxB {
		c.rec.Backoff = 0
	}
	delay := c.rec.Backoff
	c.nextStart = info.FinishedAt.Add(delay)
	if delay == 0 {
		c.rec.Backoff = initial
	} else {
		c.rec.Backoff = min(2*delay, maxB)
	}
	c.save(r.log)
	r.log.Info("container exited", "container", c.name, "attempt", info.Attempt, "exitCode", info.ExitCode, "reason", info.Reason)
	if !r.isDeleting() && r.willRestart(c) && delay > 0 {
		r.event(corev1.EventTypeWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s", c.name))
	}
}

// readTerminationMessage reads up to 4096 bytes, kubelet's limit per container.
func readTerminationMessage(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return string(b)
}

// tailFile returns at most the last lines lines and bytes bytes of a file.
func tailFile(p string, lines, bytes int) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > int64(64*bytes) {
		_, _ = f.Seek(st.Size()-int64(64*bytes), io.SeekStart)
	}
	var all []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		all = append(all, sc.Text())
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	out := strings.Join(all, "\n")
	if len(out) > bytes {
		out = out[len(out)-bytes:]
	}
	return out
}
