package nodeagent

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// publish stores the node's view of the pod for status and wakes the notifier.
func (r *podRuntime) publish() {
	pod := r.currentPod()
	now := time.Now()
	snap := PodRuntimeStatus{
		PodIP:        r.state.PodIP,
		HostIP:       r.p.hostIP,
		StartTime:    r.state.StartTime,
		SandboxReady: r.sandboxReady,
		Reason:       r.state.Reason,
		Message:      r.state.Message,
	}
	select {
	case <-r.done:
		snap.Terminal = true
	default:
		snap.Terminal = r.state.Reason != ""
	}
	initDone := true
	for _, c := range r.inits {
		snap.InitContainers = append(snap.InitContainers, r.containerStatus(pod, c, now, false))
		if c.rec.Exit == nil || c.rec.Exit.ExitCode != 0 {
			initDone = false
		}
	}
	for _, c := range r.ctrs {
		snap.Containers = append(snap.Containers, r.containerStatus(pod, c, now, !initDone))
	}
	r.mu.Lock()
	r.snap = snap
	r.published = true
	r.mu.Unlock()
	r.markDirty()
}

// containerStatus is a container's status as kubelet reports it.
func (r *podRuntime) containerStatus(pod *corev1.Pod, c *ctr, now time.Time, initializing bool) corev1.ContainerStatus {
	st := corev1.ContainerStatus{Name: c.name, Ready: c.ready, ImageID: c.rec.Exe}
	if c.pull.digest != "" {
		st.ImageID = c.pull.digest
	}
	if spec := r.specOf(pod, c); spec != nil {
		st.Image = spec.Image
	}
	if c.rec.Attempt > 1 {
		st.RestartCount = int32(c.rec.Attempt - 1)
	}
	if c.rec.Attempt > 0 {
		st.ContainerID = fmt.Sprintf("d8v://%s/%s/%d", r.uid, c.name, c.rec.Attempt)
	}
	started := c.running != nil
	st.Started = &started
	term := func(e *ExitInfo) *corev1.ContainerStateTerminated {
		if e == nil {
			return nil
		}
		reason := e.Reason
		if reason == "" {
			reason = "Completed"
			if e.ExitCode != 0 {
				reason = "Error"
			}
		}
		return &corev1.ContainerStateTerminated{
			ExitCode: e.ExitCode, Signal: e.Signal, Reason: reason, Message: e.Message,
			StartedAt: metav1.NewTime(e.StartedAt), FinishedAt: metav1.NewTime(e.FinishedAt),
			ContainerID: fmt.Sprintf("d8v://%s/%s/%d", r.uid, c.name, e.Attempt),
		}
	}
	deleting := r.tearingDown || r.state.Finished
	switch {
	case c.running != nil:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.running.StartedAt)}
		st.LastTerminationState.Terminated = term(c.rec.Exit)
	case c.rec.Exit != nil:
		if !deleting && r.willRestart(c) && now.Before(c.nextStart) {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)",
					c.nextStart.Sub(c.rec.Exit.FinishedAt).Round(time.Second), c.name, pod.Name, pod.Namespace, pod.UID)}
			st.LastTerminationState.Terminated = term(c.rec.Exit)
		} else {
			st.State.Terminated = term(c.rec.Exit)
			st.LastTerminationState.Terminated = term(c.rec.PrevExit)
		}
	default:
		w := &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		switch {
		case c.pull.never:
			w.Reason, w.Message = "ErrImageNeverPull", c.pull.err
		case c.pull.err != "" && c.pull.failures > 1 && now.Before(c.nextStart):
			w.Reason, w.Message = "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: %s", st.Image, c.pull.err)
		case c.pull.err != "":
			w.Reason, w.Message = "ErrImagePull", c.pull.err
		case c.configErr != "":
			w.Reason, w.Message = "CreateContainerConfigError", c.configErr
		case r.setupErr != "":
			w.Message = r.setupErr
		case initializing && !c.init:
			w.Reason = "PodInitializing"
		}
		st.State.Waiting = w
	}
	return st
}
