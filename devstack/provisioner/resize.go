package provisioner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/d8virt/devstack/provisioner/hostvol"
)

// Step is the next thing to do for a claim that grew, in the order of Kubernetes' resize
// protocol (the external resizer's part, then kubelet's): announce the resize on the claim, grow
// the volume and the PV, grow the file system, and report the new capacity.
type Step int

const (
	// StepNone: nothing to do.
	StepNone Step = iota
	// StepStart: set status.allocatedResources and the Resizing condition.
	StepStart
	// StepExpand: grow the backing file and loop device, then the PV's capacity.
	StepExpand
	// StepResizeFS: mark FileSystemResizePending, grow the file system once no pod uses it.
	StepResizeFS
	// StepFinish: status.capacity is the PV's, the resize conditions go.
	StepFinish
)

func (s Step) String() string {
	return [...]string{"none", "start", "expand", "resize-fs", "finish"}[s]
}

func storageOf(l corev1.ResourceList) int64 {
	q, ok := l[corev1.ResourceStorage]
	if !ok {
		return 0
	}
	return q.Value()
}

func hasCondition(pvc *corev1.PersistentVolumeClaim, t corev1.PersistentVolumeClaimConditionType) bool {
	for _, c := range pvc.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// NextStep decides, from the claim and its PV alone, what the resizer does next and the size it
// aims at. Every step is safe to repeat, so a resizer that stopped half-way picks up where it was.
func NextStep(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (Step, int64) {
	if pv == nil || !Ours(pv) || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != pv.Name {
		return StepNone, 0
	}
	mode := pvMode(pv)
	want := VolumeSize(mode, storageOf(pvc.Spec.Resources.Requests))
	have := storageOf(pv.Spec.Capacity)
	switch {
	case want > have:
		if storageOf(pvc.Status.AllocatedResources) < want || !hasCondition(pvc, corev1.PersistentVolumeClaimResizing) {
			return StepStart, want
		}
		return StepExpand, want
	case storageOf(pvc.Status.Capacity) < have:
		if mode == corev1.PersistentVolumeFilesystem {
			return StepResizeFS, have
		}
		return StepFinish, have
	case hasCondition(pvc, corev1.PersistentVolumeClaimResizing) || hasCondition(pvc, corev1.PersistentVolumeClaimFileSystemResizePending) ||
		pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != "":
		return StepFinish, have
	}
	return StepNone, 0
}

// setCondition replaces the claim's resize conditions by c (none when c is nil).
func setCondition(pvc *corev1.PersistentVolumeClaim, c *corev1.PersistentVolumeClaimCondition) {
	var keep []corev1.PersistentVolumeClaimCondition
	for _, old := range pvc.Status.Conditions {
		if old.Type != corev1.PersistentVolumeClaimResizing && old.Type != corev1.PersistentVolumeClaimFileSystemResizePending {
			keep = append(keep, old)
		}
	}
	if c != nil {
		keep = append(keep, *c)
	}
	pvc.Status.Conditions = keep
}

func setAllocatedStatus(pvc *corev1.PersistentVolumeClaim, s corev1.ClaimResourceStatus) {
	if s == "" {
		delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
		if len(pvc.Status.AllocatedResourceStatuses) == 0 {
			pvc.Status.AllocatedResourceStatuses = nil
		}
		return
	}
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = s
}

// inUseRetry is how often a file system that waits for its pods to go is looked at.
const inUseRetry = 2 * time.Second

// Resizer grows the volumes of claims whose requested size grew. No in-tree or CSI resizer
// serves an external provisioner, and the volumes are on this machine, so it plays both the
// external resizer's and kubelet's parts.
type Resizer struct {
	kube   kubernetes.Interface
	store  Store
	events record.EventRecorder
	log    *slog.Logger
	clock  func() time.Time

	pvcs  corelisters.PersistentVolumeClaimLister
	pvs   corelisters.PersistentVolumeLister
	queue workqueue.TypedRateLimitingInterface[string]
}

// NewResizer watches claims and volumes through factory; Run it after the factory started.
func NewResizer(kube kubernetes.Interface, factory informers.SharedInformerFactory, store Store, events record.EventRecorder,
	log *slog.Logger, clock func() time.Time) (*Resizer, error) {
	r := &Resizer{kube: kube, store: store, events: events, log: log, clock: clock,
		pvcs:  factory.Core().V1().PersistentVolumeClaims().Lister(),
		pvs:   factory.Core().V1().PersistentVolumes().Lister(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	claim := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(key)
		}
	}
	if _, err := factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: claim, UpdateFunc: func(_, obj any) { claim(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	volume := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
			r.queue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
		}
	}
	if _, err := factory.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: volume, UpdateFunc: func(_, obj any) { volume(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch volumes: %w", err)
	}
	return r, nil
}

// Run works the queue until ctx ends.
func (r *Resizer) Run(ctx context.Context) {
	defer r.queue.ShutDown()
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		for r.next(ctx) {
		}
	}, time.Second)
	<-ctx.Done()
}

func (r *Resizer) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	err := r.sync(ctx, key)
	if errors.Is(err, hostvol.ErrInUse) {
		// The file system grows once no pod uses it; look again soon.
		r.queue.Forget(key)
		r.queue.AddAfter(key, inUseRetry)
		return true
	}
	if err != nil {
		r.log.Error("resize failed", "claim", key, "err", err)
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// sync takes a claim through every step it needs, reading it and its PV anew after each write.
func (r *Resizer) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	for range 5 {
		pvc, err := r.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return ignoreNotFound(err)
		}
		if pvc.Spec.VolumeName == "" {
			return nil
		}
		pv, err := r.kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return ignoreNotFound(err)
		}
		step, size := NextStep(pvc, pv)
		if step == StepNone {
			return nil
		}
		// Debug: a file system waiting for its pod is looked at every few seconds.
		r.log.Debug("resize", "claim", key, "pv", pv.Name, "step", step, "bytes", size)
		if err := r.do(ctx, step, size, pvc, pv); err != nil {
			if !errors.Is(err, hostvol.ErrInUse) {
				r.events.Event(pvc, corev1.EventTypeWarning, "VolumeResizeFailed", err.Error())
			}
			return fmt.Errorf("%s: %w", step, err)
		}
	}
	return nil
}

func (r *Resizer) do(ctx context.Context, step Step, size int64, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	now := metav1.NewTime(r.clock())
	q := *resource.NewQuantity(size, resource.BinarySI)
	claims := r.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	switch step {
	case StepStart:
		pvc = pvc.DeepCopy()
		if pvc.Status.AllocatedResources == nil {
			pvc.Status.AllocatedResources = corev1.ResourceList{}
		}
		pvc.Status.AllocatedResources[corev1.ResourceStorage] = q
		setAllocatedStatus(pvc, corev1.PersistentVolumeClaimControllerResizeInProgress)
		setCondition(pvc, &corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimResizing,
			Status: corev1.ConditionTrue, LastTransitionTime: now})
		if _, err := claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update claim status: %w", err)
		}
		r.events.Eventf(pvc, corev1.EventTypeNormal, "Resizing", "External resizer is resizing volume %s", pv.Name)
	case StepExpand:
		if err := r.store.Grow(ctx, pv.Name, pvMode(pv), size); err != nil {
			return err
		}
		pv = pv.DeepCopy()
		pv.Spec.Capacity[corev1.ResourceStorage] = q
		if _, err := r.kube.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update volume capacity: %w", err)
		}
	case StepResizeFS:
		if !hasCondition(pvc, corev1.PersistentVolumeClaimFileSystemResizePending) {
			pvc = pvc.DeepCopy()
			setAllocatedStatus(pvc, corev1.PersistentVolumeClaimNodeResizePending)
			setCondition(pvc, &corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimFileSystemResizePending,
				Status: corev1.ConditionTrue, LastTransitionTime: now,
				Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node."})
			if _, err := claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update claim status: %w", err)
			}
			r.events.Eventf(pvc, corev1.EventTypeNormal, "FileSystemResizeRequired", "Require file system resize of volume %s on node", pv.Name)
		}
		if err := r.store.ResizeFS(ctx, pv.Name); err != nil {
			return err
		}
		return r.do(ctx, StepFinish, size, pvc, pv)
	case StepFinish:
		// The status just written may be newer than pvc.
		fresh, err := claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get claim: %w", err)
		}
		fresh.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: q}
		setAllocatedStatus(fresh, "")
		setCondition(fresh, nil)
		if _, err := claims.UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update claim status: %w", err)
		}
		r.events.Eventf(fresh, corev1.EventTypeNormal, "VolumeResizeSuccessful", "resize volume %s to %s", pv.Name, q.String())
		r.log.Info("volume resized", "claim", pvc.Namespace+"/"+pvc.Name, "pv", pv.Name, "bytes", size)
	}
	return nil
}

// ignoreNotFound: an object that is gone needs nothing more.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
