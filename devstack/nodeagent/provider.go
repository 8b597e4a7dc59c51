package nodeagent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/d8virt/devstack/imagepull"
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
	puller   *imagepull.Puller

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

// statusCoalesce is how long the notifier lets a pod's status settle before it hands it on:
// changes that come close together (an init container exits and the next container starts,
// the containers of a Pod start one after another) make one write, as kubelet's relist of its
// containers (every second) makes one.
const statusCoalesce = 200 * time.Millisecond

// notifyLoop hands the pod's status to the pod controller whenever it changes.
func (p *Provider) notifyLoop(r *podRuntime) {
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-r.dirty:
		}
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(statusCoalesce):
		}
		// What changed meanwhile goes with this status.
		select {
		case <-r.dirty:
		default:
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
