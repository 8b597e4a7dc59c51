package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/localnet"
)

// markLost makes a pod Failed because its processes are gone, killing whatever is left of it.
func (r *podRuntime) markLost(msg string) {
	now := time.Now()
	for _, c := range r.all() {
		if c.running != nil {
			if c.running.process().Alive() {
				_ = syscall.Kill(-c.running.Pid, syscall.SIGKILL)
			}
			continue // its monitor reports the exit
		}
		if c.rec.Running || (c.rec.Exit == nil && c.rec.Attempt == 0) {
			c.rec.Attempt = max(c.rec.Attempt, 1)
			c.rec.PrevExit = c.rec.Exit
			c.rec.Exit = &ExitInfo{Attempt: c.rec.Attempt, ExitCode: 137, FinishedAt: now, Reason: "ContainerStatusUnknown",
				Message: "The container could not be located when the node agent restarted"}
			c.rec.Running = false
			if _, err := os.Stat(c.dir); err == nil {
				c.save(r.log)
			}
		}
	}
	r.state.Reason = "ProcessesGone"
	r.state.Message = msg
	r.state.Finished = true
	r.releaseSandbox()
	if _, err := os.Stat(r.p.layout.PodDir(r.uid)); err == nil {
		r.saveState()
	}
	r.log.Warn("pod lost", "message", msg)
}

// recoverPods loads the pods an earlier agent run left in the root directory: live containers are
// adopted, exits recorded meanwhile are processed, and pods whose processes vanished without a
// trace are reported Failed. Directories without a readable pod are removed.
func (p *Provider) recoverPods() error {
	entries, err := os.ReadDir(p.layout.PodsDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		uid := types.UID(e.Name())
		r, err := p.loadPod(uid)
		if err != nil {
			p.log.Warn("removing unreadable pod directory", "uid", uid, "err", err)
			_ = unmountUnder(p.layout.PodDir(uid))
			_ = p.net.DeleteHost(NetHostName(uid))
			_ = os.RemoveAll(p.layout.PodDir(uid))
			continue
		}
		r.log.Info("recovered pod from an earlier run")
		p.add(r)
	}
	return nil
}

func (p *Provider) loadPod(uid types.UID) (*podRuntime, error) {
	var pod corev1.Pod
	if err := readJSON(p.layout.PodFile(uid), &pod); err != nil {
		return nil, err
	}
	if pod.UID != uid {
		return nil, fmt.Errorf("pod.json holds pod %s", pod.UID)
	}
	r := newPodRuntime(p, &pod)
	if err := readJSON(p.layout.StateFile(uid), &r.state); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	type exited struct {
		c    *ctr
		info ExitInfo
	}
	var lost []string
	var adopted []*ctr
	var exits []exited
	for _, c := range r.all() {
		if err := readJSON(filepath.Join(c.dir, recordFile), &c.rec); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if !c.rec.Running {
			continue
		}
		var ri RunningInfo
		if readJSON(filepath.Join(c.dir, runningFile), &ri) == nil && ri.Attempt == c.rec.Attempt && ri.shim().Alive() {
			c.running = &ri
			adopted = append(adopted, c)
			continue
		}
		var ei ExitInfo
		if readJSON(filepath.Join(c.dir, exitFile), &ei) == nil && ei.Attempt == c.rec.Attempt {
			exits = append(exits, exited{c, ei})
			continue
		}
		lost = append(lost, c.name)
	}
	netnsGone := false
	if r.state.NetHost != "" && !r.state.Finished {
		_, err := os.Stat(filepath.Join("/run/netns", localnet.NetNSPrefix+r.state.NetHost))
		netnsGone = err != nil
	}
	started := len(adopted) > 0 || len(exits) > 0 || len(lost) > 0
	for _, c := range r.all() {
		started = started || c.rec.Attempt > 0
	}
	switch {
	case r.state.Reason != "":
		// Lost in an earlier run already.
	case len(lost) > 0:
		r.markLost(fmt.Sprintf("the node agent restarted and found the processes of %s gone", strings.Join(lost, ", ")))
	case netnsGone && started:
		r.markLost("the node agent restarted and found the pod's network namespace gone")
	case netnsGone:
		r.state.NetHost = "" // set up again from scratch
	default:
		r.sandboxReady = !r.state.Finished && r.state.Volumes != nil
		r.refreshAt = time.Now() // renew tokens now: the agent may have been down a while
	}
	for _, c := range adopted {
		if spec := r.specOf(&pod, c); spec != nil && spec.ReadinessProbe == nil {
			c.ready = true
		}
		go r.monitor(p.ctx, c, c.rec.Attempt, nil, c.running.shim())
		c := c
		r.posts <- func() {
			if c.running != nil && r.state.Reason == "" {
				if spec := r.specOf(r.currentPod(), c); spec != nil {
					r.startProbe(p.ctx, c, spec)
				}
			}
		}
	}
	for _, e := range exits {
		e := e
		c := e.c
		c.running = &RunningInfo{Attempt: e.info.Attempt, StartedAt: e.info.StartedAt}
		r.posts <- func() { r.onExit(c, e.info) }
	}
	return r, nil
}
