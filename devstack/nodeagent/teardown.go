package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/d8virt/devstack/localnet"
)

// signal sends sig to the process group of c's running attempt.
func (r *podRuntime) signal(c *ctr, sig syscall.Signal) {
	if c.running == nil {
		return
	}
	if c.running.Pid == 0 {
		// The shim records the pid right after forking; give it a moment.
		for i := 0; i < 100; i++ {
			var ri RunningInfo
			if readJSON(filepath.Join(c.dir, runningFile), &ri) == nil && ri.Attempt == c.running.Attempt {
				*c.running = ri
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if c.running.Pid > 0 && c.running.process().Alive() {
		if err := syscall.Kill(-c.running.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			r.log.Warn("signal container", "container", c.name, "signal", sig, "err", err)
		}
	}
}

// teardown stops the pod: SIGTERM to every container's process group, SIGKILL once the grace
// period is over, and once every attempt has exited the cleanup. It reports true when done.
func (r *podRuntime) teardown(grace time.Duration) bool {
	now := time.Now()
	if !r.tearingDown {
		r.tearingDown = true
		r.killAt = now.Add(grace)
		r.log.Info("stopping pod", "grace", grace)
		for _, c := range r.all() {
			if c.probeCancel != nil {
				c.probeCancel()
				c.probeCancel = nil
			}
			if c.running != nil {
				r.event(corev1.EventTypeNormal, "Killing", fmt.Sprintf("Stopping container %s", c.name))
				r.signal(c, syscall.SIGTERM)
			}
		}
	} else if now.Add(grace).Before(r.killAt) {
		r.killAt = now.Add(grace)
	}
	runningLeft := false
	for _, c := range r.all() {
		c.ready = false
		if c.running != nil {
			runningLeft = true
		}
	}
	if runningLeft {
		if !now.Before(r.killAt) {
			if !r.killed {
				r.log.Info("grace period over, killing containers")
			}
			r.killed = true
			for _, c := range r.all() {
				r.signal(c, syscall.SIGKILL)
			}
		}
		return false
	}
	if err := r.cleanup(); err != nil {
		r.log.Warn("pod cleanup", "err", err)
	}
	r.state.Finished = true
	r.sandboxReady = false
	r.mu.Lock()
	r.doneAt = time.Now()
	r.mu.Unlock()
	close(r.done)
	r.publish()
	r.log.Info("pod stopped and cleaned up")
	r.p.maybeForget(r)
	return true
}

// cleanup unmounts whatever is mounted below the pod directory, deletes the network namespace
// and removes the pod directory.
func (r *podRuntime) cleanup() error {
	dir := r.p.layout.PodDir(r.uid)
	var errs []error
	errs = append(errs, unmountUnder(dir))
	if r.state.NetHost != "" {
		errs = append(errs, r.p.net.DeleteHost(r.state.NetHost))
	} else if _, err := os.Stat(filepath.Join("/run/netns", localnet.NetNSPrefix+NetHostName(r.uid))); err == nil {
		errs = append(errs, r.p.net.DeleteHost(NetHostName(r.uid)))
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}
