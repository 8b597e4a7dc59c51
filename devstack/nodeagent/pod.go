package nodeagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/proc"
)

// podState is what the agent keeps about a pod across its own restarts (state.json).
type podState struct {
	// NetHost is the localnet host (network namespace) of the pod; empty with hostNetwork.
	NetHost   string            `json:"netHost,omitempty"`
	PodIP     string            `json:"podIP,omitempty"`
	StartTime *metav1.Time      `json:"startTime,omitempty"`
	Volumes   map[string]string `json:"volumes,omitempty"`
	Automount bool              `json:"automount,omitempty"`
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
			r.event(corev1.EventTypeWarning, "FailedMount", err.Error())
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

func (r *podRuntime) releaseSandbox() {
	r.sandboxReady = false
	if r.state.NetHost != "" {
		if err := r.p.net.DeleteHost(r.state.NetHost); err != nil {
			r.log.Warn("delete network namespace", "err", err)
		}
	}
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

// NetHostName is the localnet host (network namespace d8v-<name>) of a pod: derived from its UID,
// so it is unique machine-wide; localnet hashes it into interface names that fit Linux's limit.
func NetHostName(uid types.UID) string { return "pod-" + string(uid) }

// setupSandbox creates the pod directory, its network namespace, /etc/hosts and volumes.
func (r *podRuntime) setupSandbox(ctx context.Context) error {
	pod := r.currentPod()
	l := r.p.layout
	for _, d := range []string{l.PodDir(r.uid), l.LogsDir(r.uid)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := writeJSON(l.PodFile(r.uid), pod); err != nil {
		return err
	}
	if r.state.StartTime == nil {
		now := metav1.Now()
		r.state.StartTime = &now
	}
	if pod.Spec.HostNetwork {
		r.state.PodIP = r.p.hostIP
	} else {
		name := NetHostName(r.uid)
		r.state.NetHost = name
		r.saveState() // before the namespace exists, so a crash leaves nothing untracked
		h, err := r.p.net.AddHost(name)
		if err != nil {
			return fmt.Errorf("network namespace: %w", err)
		}
		r.state.PodIP = h.IP.String()
	}
	if err := os.WriteFile(l.EtcHosts(r.uid), []byte(etcHosts(pod, r.state.PodIP)), 0o644); err != nil {
		return err
	}
	automount, err := r.p.automount(ctx, pod)
	if err != nil {
		return err
	}
	r.state.Automount = automount
	vols, _ := EffectiveVolumes(pod, automount)
	paths, refresh, err := PrepareVolumes(ctx, l, pod, vols, r.p.volumeSource(r, pod, r.state.PodIP))
	if err != nil {
		return err
	}
	r.state.Volumes = paths
	r.refreshAt = refresh
	r.resyncAt = time.Now().Add(r.p.cfg.VolumeResync)
	r.saveState()
	return nil
}

// refreshVolumes renews tokens and re-reads configMaps, secrets and downward API values.
func (r *podRuntime) refreshVolumes(ctx context.Context) {
	pod := r.currentPod()
	vols, _ := EffectiveVolumes(pod, r.state.Automount)
	_, refresh, err := PrepareVolumes(ctx, r.p.layout, pod, vols, r.p.volumeSource(r, pod, r.state.PodIP))
	r.resyncAt = time.Now().Add(r.p.cfg.VolumeResync)
	if err != nil {
		r.log.Warn("refresh volumes", "err", err)
		r.refreshAt = time.Now().Add(30 * time.Second)
		return
	}
	r.refreshAt = refresh
}

func etcHosts(pod *corev1.Pod, ip string) string {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (d8v node agent).\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	if ip != "" {
		names := []string{podHostname(pod)}
		if pod.Spec.Subdomain != "" {
			names = []string{fmt.Sprintf("%s.%s.%s.svc.cluster.local", podHostname(pod), pod.Spec.Subdomain, pod.Namespace), podHostname(pod)}
		}
		fmt.Fprintf(&b, "%s\t%s\n", ip, strings.Join(names, "\t"))
	}
	for _, a := range pod.Spec.HostAliases {
		fmt.Fprintf(&b, "\n# Entries added by HostAliases.\n%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.String()
}

// podHostname is the pod's hostname: spec.hostname, or its name cut to a DNS label.
func podHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// start launches the next attempt of c. A configuration error keeps it waiting (retried later); a
// program that cannot be found counts as an attempt that failed to start.
func (r *podRuntime) start(ctx context.Context, c *ctr) {
	now := time.Now()
	pod := r.currentPod()
	spec := r.specOf(pod, c)
	if spec == nil {
		return
	}
	fail := func(err error) {
		c.configErr = err.Error()
		c.nextStart = now.Add(5 * time.Second)
		r.log.Warn("container not started", "container", c.name, "err", err)
		r.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %s", err))
	}
	env, err := ContainerEnv(r.p.envSource(pod, r.state.PodIP), spec)
	if err != nil {
		fail(err)
		return
	}
	mounts, err := r.containerMounts(pod, c, spec, env)
	if err != nil {
		fail(err)
		return
	}
	c.configErr = ""
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		fail(err)
		return
	}
	for _, f := range []string{runningFile, exitFile, startErrorFile} {
		_ = os.Remove(filepath.Join(c.dir, f))
	}
	c.rec.Attempt++
	attempt := c.rec.Attempt
	path, argv, err := ResolveExecutable(r.p.cfg.BinDir, spec.Image, ExpandArgs(env, spec.Command), ExpandArgs(env, spec.Args))
	if err == nil {
		err = r.prepareRootfs(c)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(c.dir, termLogFile), nil, 0o666)
	}
	init := InitSpec{
		Path: path, Argv: argv, Env: env, Dir: spec.WorkingDir, Hostname: podHostname(pod),
		Mounts: mounts, LogFile: r.p.layout.LogFile(r.uid, c.name), Attempt: attempt,
		PrivateDev: len(spec.VolumeDevices) > 0,
	}
	if r.state.NetHost != "" {
		init.NetNS = filepath.Join("/run/netns", localnet.NetNSPrefix+r.state.NetHost)
	}
	if err == nil {
		err = writeJSON(filepath.Join(c.dir, initFile), init)
	}
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = r.startShim(c)
	}
	if err != nil {
		r.log.Warn("container failed to start", "container", c.name, "err", err)
		r.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Error: %s", err))
		c.rec.Running = false
		c.save(r.log)
		r.onExit(c, ExitInfo{Attempt: attempt, ExitCode: startErrorExitCode, StartError: err.Error(), StartedAt: now, FinishedAt: time.Now()})
		return
	}
	c.rec.Running = true
	c.rec.Exe = path
	c.save(r.log)
	c.running = &RunningInfo{Attempt: attempt, ShimPid: cmd.Process.Pid, StartedAt: now}
	if shim, err := proc.Identify(cmd.Process.Pid); err == nil {
		c.running.ShimStartTicks = shim.StartTicks
	}
	r.log.Info("container started", "container", c.name, "attempt", attempt, "exe", path)
	r.event(corev1.EventTypeNormal, "Started", fmt.Sprintf("Started container %s", c.name))
	r.startProbe(ctx, c, spec)
	go r.monitor(ctx, c, attempt, cmd, proc.Identity{})
}

func (r *podRuntime) startShim(c *ctr) (*exec.Cmd, error) {
	logf, err := os.OpenFile(r.p.layout.LogFile(r.uid, c.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(r.p.cfg.AgentBinary, ShimCommand, c.dir)
	cmd.Args[0] = "node-agent"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	// A session of its own: the agent's terminal, process group and exit leave it alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start container shim: %w", err)
	}
	return cmd, nil
}

// prepareRootfs gives the attempt fresh private directories, seeded from the host where asked.
func (r *podRuntime) prepareRootfs(c *ctr) error {
	root := filepath.Join(c.dir, rootfsDir)
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	for _, d := range r.p.cfg.PrivateDirs {
		dst := filepath.Join(root, d.Path)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if st, err := os.Stat(d.Path); err == nil && st.IsDir() {
			if err := os.Chmod(dst, st.Mode().Perm()|st.Mode()&(fs.ModeSticky)); err != nil {
				return err
			}
			if d.Seed {
				if err := copyTree(d.Path, dst); err != nil {
					return fmt.Errorf("seed %s: %w", d.Path, err)
				}
			}
		}
	}
	return nil
}

// containerMounts lists what container-init mounts: the private directories, /etc/hosts, the
// termination log and the container's volume mounts.
func (r *podRuntime) containerMounts(pod *corev1.Pod, c *ctr, spec *corev1.Container, env []string) ([]Mount, error) {
	var ms []Mount
	for _, d := range r.p.cfg.PrivateDirs {
		ms = append(ms, Mount{Source: filepath.Join(c.dir, rootfsDir, d.Path), Target: d.Path})
	}
	if !pod.Spec.HostNetwork {
		ms = append(ms, Mount{Source: r.p.layout.EtcHosts(r.uid), Target: "/etc/hosts"})
	}
	tmp := spec.TerminationMessagePath
	if tmp == "" {
		tmp = corev1.TerminationMessagePathDefault
	}
	ms = append(ms, Mount{Source: filepath.Join(c.dir, termLogFile), Target: tmp})
	_, mountsOf := EffectiveVolumes(pod, r.state.Automount)
	for _, vm := range mountsOf(spec) {
		src, ok := r.state.Volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %q: no such volume", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = ExpandArgs(env, []string{vm.SubPathExpr})[0]
		}
		if sub != "" {
			clean := filepath.Clean(sub)
			if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("volumeMount %q: subPath %q leaves the volume", vm.Name, sub)
			}
			src = filepath.Join(src, clean)
			if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return nil, err
				}
			}
		}
		ms = append(ms, Mount{Source: src, Target: vm.MountPath, ReadOnly: vm.ReadOnly,
			HostToContainer: vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationHostToContainer})
	}
	devs, err := deviceMounts(spec, r.state.Volumes)
	if err != nil {
		return nil, err
	}
	return append(ms, devs...), nil
}

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

// unmountUnder detaches every mount point below dir, deepest first.
func unmountUnder(dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return err
	}
	points := make([]string, 0, len(mounts))
	for _, m := range mounts {
		points = append(points, m.Mountpoint)
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

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

func (r *podRuntime) event(kind, reason, msg string) {
	if r.p.recorder != nil {
		r.p.recorder.Event(r.currentPod(), kind, reason, msg)
	}
}

// copyTree copies a directory's contents (directories, regular files, symlinks) with their modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm())
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil // sockets, devices, fifos stay behind
	})
}
