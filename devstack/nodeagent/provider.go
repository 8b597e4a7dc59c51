package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/d8virt/devstack/localnet"
)

// errTerminating is DeletePod's answer while a pod's processes are still being stopped: the pod
// controller retries soon (see retryTerminating), and once the pod's terminal status is in the API
// it deletes the Pod right away instead of waiting out the grace period a second time.
var errTerminating = errors.New("d8v node agent: pod is terminating")

// retryTerminating retries DeletePod every 250ms while the pod terminates, however long its grace
// period is; other errors follow the pod controller's default policy.
func retryTerminating(ctx context.Context, key string, timesTried int, added time.Time, err error) (*time.Duration, error) {
	if errors.Is(err, errTerminating) {
		d := 250 * time.Millisecond
		return &d, nil
	}
	return node.DefaultRetryFunc(ctx, key, timesTried, added, err)
}

// Provider runs the pods bound to the node as host processes. It implements virtual-kubelet's
// PodLifecycleHandler and PodNotifier.
type Provider struct {
	cfg      *Config
	log      *slog.Logger
	kube     kubernetes.Interface
	layout   Layout
	net      localnet.Net
	hostIP   string
	apiHost  string
	apiPort  string
	caCert   []byte
	ctx      context.Context
	lister   corev1listers.PodLister
	recorder record.EventRecorder

	mu     sync.Mutex
	byUID  map[types.UID]*podRuntime
	byName map[string]types.UID
	notify func(*corev1.Pod)
}

var (
	_ node.PodLifecycleHandler = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
)

func (p *Provider) lookup(namespace, name string) *podRuntime {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byUID[p.byName[namespace+"/"+name]]
}

// add registers a runtime and starts its loops.
func (p *Provider) add(r *podRuntime) {
	p.mu.Lock()
	if old := p.byUID[p.byName[r.key]]; old != nil && old.uid != r.uid {
		// A new pod with the name of one that is still going away (StatefulSets do that).
		old.requestDelete(0)
	}
	p.byUID[r.uid] = r
	p.byName[r.key] = r.uid
	p.mu.Unlock()
	go r.run()
	go p.notifyLoop(r)
}

// CreatePod starts running a pod bound to the node.
func (p *Provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r := p.byUID[pod.UID]
	p.mu.Unlock()
	if r != nil {
		r.setPod(pod)
		return nil
	}
	r = newPodRuntime(p, pod)
	if startedBefore(pod) {
		// The API says the pod ran here, yet nothing of it is on this node: its processes are gone.
		r.markLost("the node agent has no record of this pod's processes: they did not survive an agent or machine restart")
	}
	r.log.Info("pod added")
	p.add(r)
	return nil
}

// startedBefore tells a pod whose status shows containers that have run.
func startedBefore(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			if s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil || s.RestartCount > 0 {
				return true
			}
		}
	}
	return false
}

// UpdatePod takes a changed pod spec (labels, annotations, images); running processes keep theirs.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r := p.byUID[pod.UID]
	p.mu.Unlock()
	if r == nil {
		return p.CreatePod(ctx, pod)
	}
	r.setPod(pod)
	return nil
}

// DeletePod stops a pod: the first call starts the teardown, and errTerminating asks the pod
// controller to come back until the processes are gone, the pod is cleaned up and its terminal
// status has reached the API.
func (p *Provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	r := p.byUID[pod.UID]
	p.mu.Unlock()
	if r == nil {
		return errdefs.NotFoundf("pod %s/%s (%s) is not on this node", pod.Namespace, pod.Name, pod.UID)
	}
	r.requestDelete(gracePeriod(pod))
	api, apiErr := p.lister.Pods(pod.Namespace).Get(pod.Name)
	inAPI := apiErr == nil && api.UID == pod.UID
	if !inAPI {
		// Nothing is left for the pod controller to do (the Pod is gone, or this is a leftover
		// from an earlier run): the teardown finishes on its own and the pod is forgotten then.
		return nil
	}
	select {
	case <-r.done:
	default:
		return errTerminating
	}
	r.mu.Lock()
	doneAt := r.doneAt
	r.mu.Unlock()
	if anyRunning(&api.Status) && time.Since(doneAt) < 10*time.Second {
		return errTerminating
	}
	p.forget(r)
	return nil
}

func anyRunning(st *corev1.PodStatus) bool {
	for _, s := range st.ContainerStatuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return true
		}
	}
	return false
}

// gracePeriod is the pod's deletion grace period, or its termination grace period, or 30s.
func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// maybeForget drops a torn-down pod once the API no longer has it.
func (p *Provider) maybeForget(r *podRuntime) {
	select {
	case <-r.done:
	default:
		return
	}
	if p.lister != nil {
		ns, name, _ := strings.Cut(r.key, "/")
		if api, err := p.lister.Pods(ns).Get(name); err == nil && api.UID == r.uid {
			return
		}
	}
	p.forget(r)
}

func (p *Provider) forget(r *podRuntime) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byUID[r.uid] != r {
		return
	}
	delete(p.byUID, r.uid)
	if p.byName[r.key] == r.uid {
		delete(p.byName, r.key)
	}
	r.mu.Lock()
	r.forgotten = true
	r.mu.Unlock()
	r.markDirty()
}

// GetPod returns a pod the node runs, with its current status. Pods being torn down are not
// reported: the pod controller then lets a new pod of the same name in.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	r := p.lookup(namespace, name)
	if r == nil || r.isDeleting() {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return r.statusPod(), nil
}

// GetPodStatus returns the current status of a pod the node runs.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods lists the pods the node runs.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	rs := make([]*podRuntime, 0, len(p.byUID))
	for _, r := range p.byUID {
		rs = append(rs, r)
	}
	p.mu.Unlock()
	var out []*corev1.Pod
	for _, r := range rs {
		if !r.isDeleting() {
			out = append(out, r.statusPod())
		}
	}
	return out, nil
}

// NotifyPods registers the pod controller's status callback.
func (p *Provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	rs := make([]*podRuntime, 0, len(p.byUID))
	for _, r := range p.byUID {
		rs = append(rs, r)
	}
	p.mu.Unlock()
	for _, r := range rs {
		r.markDirty()
	}
}

// statusPod is the pod with the status the node computes for it now. Conditions the node does
// not own, and readiness gates, come from the pod as the API has it.
func (r *podRuntime) statusPod() *corev1.Pod {
	r.mu.Lock()
	pod := r.pod.DeepCopy()
	snap := r.snap
	r.mu.Unlock()
	base := pod
	if r.p.lister != nil {
		if api, err := r.p.lister.Pods(pod.Namespace).Get(pod.Name); err == nil && api.UID == pod.UID {
			base = api
		}
	}
	st := ComputeStatus(base, snap, metav1.Now())
	// The snapshot's container statuses are shared between callers: hand out a copy.
	pod.Status = *st.DeepCopy()
	return pod
}

// notifyLoop hands the pod's status to the pod controller whenever it changes.
func (p *Provider) notifyLoop(r *podRuntime) {
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-r.dirty:
		}
		r.mu.Lock()
		gone, published := r.forgotten, r.published
		r.mu.Unlock()
		if gone {
			return
		}
		if !published {
			continue // nothing to tell before the run loop has looked at the pod
		}
		p.mu.Lock()
		cb := p.notify
		p.mu.Unlock()
		if cb != nil {
			cb(r.statusPod())
		}
	}
}

// onAPIPodUpdate re-sends a pod's status when a readiness gate's condition changed.
func (p *Provider) onAPIPodUpdate(oldPod, newPod *corev1.Pod) {
	if gateConditions(oldPod) == gateConditions(newPod) {
		return
	}
	p.mu.Lock()
	r := p.byUID[newPod.UID]
	p.mu.Unlock()
	if r != nil {
		r.markDirty()
	}
}

func (p *Provider) onAPIPodDelete(pod *corev1.Pod) {
	p.mu.Lock()
	r := p.byUID[pod.UID]
	p.mu.Unlock()
	if r != nil {
		p.maybeForget(r)
	}
}

// envSource reads configMaps and secrets from the API for env and volumes.
func (p *Provider) envSource(pod *corev1.Pod, podIP string) EnvSource {
	get := func() (context.Context, context.CancelFunc) { return context.WithTimeout(p.ctx, 15*time.Second) }
	return EnvSource{
		Pod: pod, PodIP: podIP, HostIP: p.hostIP,
		NodeAllocatable: p.cfg.allocatable(),
		APIHost:         p.apiHost, APIPort: p.apiPort,
		ConfigMap: func(ns, name string) (*corev1.ConfigMap, error) {
			ctx, cancel := get()
			defer cancel()
			return p.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Secret: func(ns, name string) (*corev1.Secret, error) {
			ctx, cancel := get()
			defer cancel()
			return p.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		},
	}
}

// volumeSource reads volume contents from the API. Tokens are kept in the pod's cache until they
// are due for renewal, so the periodic volume refresh does not ask for a new one every time.
func (p *Provider) volumeSource(r *podRuntime, pod *corev1.Pod, podIP string) VolumeSource {
	return VolumeSource{
		Env:    p.envSource(pod, podIP),
		CACert: p.caCert,
		Token: func(ctx context.Context, sa, audience string, exp int64) (Token, error) {
			key := fmt.Sprintf("%s|%s|%d", sa, audience, exp)
			r.mu.Lock()
			cached, ok := r.tokens[key]
			r.mu.Unlock()
			if ok && time.Now().Before(cached.RefreshAt()) {
				return cached, nil
			}
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: &exp,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
			}}
			if audience != "" {
				req.Spec.Audiences = []string{audience}
			}
			if sa == "" {
				sa = "default"
			}
			issued := time.Now()
			tr, err := p.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
			if err != nil {
				return Token{}, err
			}
			t := Token{Value: tr.Status.Token, Issued: issued, Expires: tr.Status.ExpirationTimestamp.Time}
			r.mu.Lock()
			r.tokens[key] = t
			r.mu.Unlock()
			return t, nil
		},
		ClaimPath: func(ctx context.Context, ns, claim string) (string, error) {
			pvc, err := p.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
				return "", fmt.Errorf("persistentVolumeClaim %q is not bound", claim)
			}
			pv, err := p.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			switch {
			case pv.Spec.HostPath != nil:
				if err := checkHostPath(pv.Spec.HostPath.Path, pv.Spec.HostPath.Type); err != nil {
					return "", err
				}
				return pv.Spec.HostPath.Path, nil
			case pv.Spec.Local != nil:
				return pv.Spec.Local.Path, nil
			}
			return "", fmt.Errorf("persistentVolume %q is neither hostPath nor local", pv.Name)
		},
	}
}

// automount tells whether the pod gets its service-account token: the pod's setting, else the
// service account's, else yes.
func (p *Provider) automount(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken, nil
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	got, err := p.kube.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, sa, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("service account %q: %w", sa, err)
	}
	if got.AutomountServiceAccountToken != nil {
		return *got.AutomountServiceAccountToken, nil
	}
	return true, nil
}

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

// podsClient writes pod status without ever dropping a condition that someone else wrote: before
// each status update it takes the conditions the node does not own (readiness gates, ...) from the
// pod as the API has it now, re-evaluates Ready against them, and retries on conflicts.
type podsClient struct {
	kube kubernetes.Interface
}

func (c podsClient) Pods(namespace string) corev1client.PodInterface {
	return statusMergingPods{PodInterface: c.kube.CoreV1().Pods(namespace)}
}

type statusMergingPods struct {
	corev1client.PodInterface
}

func (s statusMergingPods) UpdateStatus(ctx context.Context, pod *corev1.Pod, opts metav1.UpdateOptions) (*corev1.Pod, error) {
	var lastErr error
	for try := 0; try < 5; try++ {
		live, err := s.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if live.UID != pod.UID {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		out := pod.DeepCopy()
		out.ResourceVersion = live.ResourceVersion
		MergeForeignConditions(&live.Spec, &out.Status, live.Status.Conditions, metav1.Now())
		if out.Status.QOSClass == "" {
			out.Status.QOSClass = live.Status.QOSClass
		}
		updated, err := s.PodInterface.UpdateStatus(ctx, out, opts)
		if err == nil || !apierrors.IsConflict(err) {
			return updated, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// quietRecorder drops the pod controller's "ProviderDeleteFailed" events for errTerminating: a pod
// that is shutting down has not failed anything.
type quietRecorder struct {
	record.EventRecorder
}

func (q quietRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if reason == "ProviderDeleteFailed" && strings.Contains(message, errTerminating.Error()) {
		return
	}
	q.EventRecorder.Event(obj, eventtype, reason, message)
}
