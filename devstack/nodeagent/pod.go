package nodeagent

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podState is what the agent keeps about a pod across its own restarts (state.json).
// sharedClaimInterval is how often a pod that shares an address looks whether its holder is gone.
const sharedClaimInterval = 500 * time.Millisecond

type podState struct {
	// NetHost is the localnet host (network namespace) of the pod; empty with hostNetwork.
	NetHost string `json:"netHost,omitempty"`
	PodIP   string `json:"podIP,omitempty"`
	// SharedIP is the requested address the pod shares with another host (SharePriorityLabel);
	// SharedHeld says it took the address over.
	SharedIP   string            `json:"sharedIP,omitempty"`
	SharedHeld bool              `json:"sharedHeld,omitempty"`
	StartTime  *metav1.Time      `json:"startTime,omitempty"`
	Volumes    map[string]string `json:"volumes,omitempty"`
	Automount  bool              `json:"automount,omitempty"`
	// Finished is set once no container will run again; the network namespace is released then.
	Finished bool `json:"finished,omitempty"`
	// Reason and Message explain a pod-level failure (processes lost).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ctrRecord is what the agent keeps about a container across its own restarts (record.json).
type ctrRecord struct {
	// Attempt counts the attempts started; restartCount is one less.
	Attempt int `json:"attempt"`
	// Running tells that attempt Attempt was started and its exit not yet seen.
	Running bool `json:"running,omitempty"`
	// Backoff is the delay before the next restart.
	Backoff time.Duration `json:"backoff,omitempty"`
	// Exit is the outcome of the latest finished attempt, PrevExit the one before.
	Exit     *ExitInfo `json:"exit,omitempty"`
	PrevExit *ExitInfo `json:"prevExit,omitempty"`
	// Exe is the program the latest attempt ran.
	Exe string `json:"exe,omitempty"`
}

// ctr is one container of a pod, as the pod's run loop sees it.
type ctr struct {
	name string
	init bool
	dir  string
	rec  ctrRecord
	// running is the attempt in flight; nil when none runs.
	running     *RunningInfo
	ready       bool
	probeCancel context.CancelFunc
	// configErr keeps a container from starting (CreateContainerConfigError) until a retry works.
	configErr string
	pull      pullState
	nextStart time.Time
}

// podRuntime runs one pod. A single goroutine (run) owns the containers; monitors and probers post
// closures to it. The published snapshot is what status reads.
type podRuntime struct {
	p   *Provider
	uid types.UID
	key string
	log *slog.Logger

	mu  sync.Mutex
	pod *corev1.Pod // latest spec given by the pod controller (guarded by mu)
	// snapshot of the node's view, for status (guarded by mu)
	snap PodRuntimeStatus
	// deleting is set once teardown has been asked for (guarded by mu)
	deleting  bool
	grace     time.Duration
	published bool             // the run loop has published a snapshot (guarded by mu)
	tokens    map[string]Token // service-account tokens by request (guarded by mu)
	done      chan struct{}    // closed when teardown finished
	doneAt    time.Time
	forgotten bool

	posts chan func()
	dirty chan struct{}

	// Owned by the run goroutine.
	state        podState
	sandboxReady bool
	setupErr     string
	setupRetryAt time.Time
	setupBackoff time.Duration
	refreshAt    time.Time
	resyncAt     time.Time
	inits, ctrs  []*ctr
	tearingDown  bool
	killAt       time.Time
	killed       bool
}

func newPodRuntime(p *Provider, pod *corev1.Pod) *podRuntime {
	r := &podRuntime{
		p:      p,
		uid:    pod.UID,
		key:    pod.Namespace + "/" + pod.Name,
		pod:    pod.DeepCopy(),
		done:   make(chan struct{}),
		posts:  make(chan func(), 64),
		dirty:  make(chan struct{}, 1),
		tokens: map[string]Token{},
	}
	r.log = p.log.With("pod", r.key, "uid", string(r.uid))
	for _, c := range pod.Spec.InitContainers {
		r.inits = append(r.inits, &ctr{name: c.Name, init: true, dir: p.layout.ContainerDir(pod.UID, c.Name)})
	}
	for _, c := range pod.Spec.Containers {
		r.ctrs = append(r.ctrs, &ctr{name: c.Name, dir: p.layout.ContainerDir(pod.UID, c.Name)})
	}
	return r
}

func (r *podRuntime) currentPod() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pod
}

func (r *podRuntime) setPod(pod *corev1.Pod) {
	r.mu.Lock()
	r.pod = pod.DeepCopy()
	r.mu.Unlock()
	if err := writeJSON(r.p.layout.PodFile(r.uid), pod); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.log.Warn("record pod", "err", err)
	}
	r.post(func() {})
}

// post runs fn on the run goroutine.
func (r *podRuntime) post(fn func()) {
	select {
	case r.posts <- fn:
	case <-r.p.ctx.Done():
	case <-r.done:
	}
}

func (r *podRuntime) markDirty() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

func (r *podRuntime) isDeleting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deleting
}

// requestDelete starts the teardown (SIGTERM, SIGKILL after grace, cleanup); a later call with a
// shorter grace period shortens it.
func (r *podRuntime) requestDelete(grace time.Duration) {
	r.mu.Lock()
	first := !r.deleting
	if first || grace < r.grace {
		r.grace = grace
	}
	r.deleting = true
	r.mu.Unlock()
	go r.post(func() {})
}

func (r *podRuntime) all() []*ctr { return append(append([]*ctr{}, r.inits...), r.ctrs...) }

func (r *podRuntime) specOf(pod *corev1.Pod, c *ctr) *corev1.Container {
	list := pod.Spec.Containers
	if c.init {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == c.name {
			return &list[i]
		}
	}
	return nil
}

// run is the pod's loop: set up the sandbox, run init containers one after the other, then the
// containers, restart them per restartPolicy, and on deletion tear everything down. It returns on
// agent shutdown without touching the pod's processes.
func (r *podRuntime) run() {
	ctx := r.p.ctx
	for {
		var wake time.Time
		r.mu.Lock()
		deleting, grace := r.deleting, r.grace
		r.mu.Unlock()
		if deleting {
			if r.teardown(grace) {
				return
			}
			wake = r.killAt
			if r.killed {
				wake = time.Now().Add(time.Second) // SIGKILL again for anything forked since
			}
		} else if !r.state.Finished {
			wake = r.step(ctx)
		}
		r.publish()
		var timer <-chan time.Time
		var t *time.Timer
		if !wake.IsZero() {
			d := time.Until(wake)
			if d < 10*time.Millisecond {
				d = 10 * time.Millisecond
			}
			t = time.NewTimer(d)
			timer = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case fn := <-r.posts:
			stop()
			fn()
			// Drain what else is queued, so a burst of events makes one status.
			for more := true; more; {
				select {
				case fn := <-r.posts:
					fn()
				default:
					more = false
				}
			}
		case <-timer:
		}
	}
}

// step advances a live pod and returns when it wants to run again at the latest.
func (r *podRuntime) step(ctx context.Context) time.Time {
	now := time.Now()
	if !r.sandboxReady {
		if now.Before(r.setupRetryAt) {
			return r.setupRetryAt
		}
		if err := r.setupSandbox(ctx); err != nil {
			r.setupErr = err.Error()
			r.setupBackoff = min(max(2*r.setupBackoff, time.Second), 30*time.Second)
			r.setupRetryAt = now.Add(r.setupBackoff)
			r.log.Warn("pod sandbox not ready", "err", err, "retry", r.setupBackoff)
			reason := "FailedMount"
			if se := (*sandboxError)(nil); errors.As(err, &se) {
				reason = se.reason
			}
			r.event(corev1.EventTypeWarning, reason, err.Error())
			return r.setupRetryAt
		}
		r.setupErr, r.setupBackoff = "", 0
		r.sandboxReady = true
	}
	if (!r.refreshAt.IsZero() && now.After(r.refreshAt)) || now.After(r.resyncAt) {
		r.refreshVolumes(ctx)
	}
	wake := r.resyncAt
	if !r.refreshAt.IsZero() && r.refreshAt.Before(wake) {
		wake = r.refreshAt
	}
	earlier := func(t time.Time) {
		if !t.IsZero() && t.Before(wake) {
			wake = t
		}
	}
	if r.state.SharedIP != "" && !r.state.SharedHeld && !r.claimShared() {
		earlier(now.Add(sharedClaimInterval))
	}
	for _, c := range r.inits {
		switch {
		case c.running != nil:
			return wake
		case c.rec.Exit != nil && c.rec.Exit.ExitCode == 0:
			continue
		case c.rec.Exit != nil && !r.willRestart(c):
			r.finish("init container " + c.name + " failed")
			return time.Time{}
		case now.Before(c.nextStart):
			earlier(c.nextStart)
			return wake
		}
		r.start(ctx, c)
		earlier(c.nextStart)
		return wake
	}
	live := false
	for _, c := range r.ctrs {
		switch {
		case c.running != nil:
			live = true
		case c.rec.Exit != nil && !r.willRestart(c):
		case now.Before(c.nextStart):
			live = true
			earlier(c.nextStart)
		default:
			live = true
			r.start(ctx, c)
			earlier(c.nextStart)
		}
	}
	if !live {
		r.finish("all containers exited")
		return time.Time{}
	}
	return wake
}

// willRestart tells whether an exited container runs again under the pod's restartPolicy.
func (r *podRuntime) willRestart(c *ctr) bool {
	if c.rec.Exit == nil {
		return true
	}
	failed := c.rec.Exit.ExitCode != 0
	policy := r.currentPod().Spec.RestartPolicy
	if c.init {
		return failed && policy != corev1.RestartPolicyNever
	}
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return failed
	}
	return true
}

// finish marks a pod whose containers will not run again and releases its network namespace.
func (r *podRuntime) finish(why string) {
	r.log.Info("pod finished", "why", why)
	r.state.Finished = true
	r.releaseSandbox()
	r.saveState()
}

func (r *podRuntime) saveState() {
	if err := writeJSON(r.p.layout.StateFile(r.uid), r.state); err != nil {
		r.log.Warn("record pod state", "err", err)
	}
}

func (c *ctr) save(log *slog.Logger) {
	if err := writeJSON(filepath.Join(c.dir, recordFile), c.rec); err != nil {
		log.Warn("record container state", "container", c.name, "err", err)
	}
}

func (r *podRuntime) event(kind, reason, msg string) {
	if r.p.recorder != nil {
		r.p.recorder.Event(r.currentPod(), kind, reason, msg)
	}
}
