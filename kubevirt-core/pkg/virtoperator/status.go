package virtoperator

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Finalizer keeps a KubeVirt until the operator has removed what it installed; KubeVirt's name.
const Finalizer = "foregroundDeleteKubeVirt"

// Condition reasons, KubeVirt's where KubeVirt has one.
const (
	ReasonExisting       = "ExistingDeployment"
	ReasonFailed         = "DeploymentFailed"
	ReasonDeletionFailed = "DeletionFailed"
	ReasonCreated        = "AllResourcesCreated"
	ReasonReady          = "AllComponentsReady"
	ReasonDeploying      = "DeploymentInProgress"
	ReasonUpdating       = "UpdateInProgress"
	ReasonDeleting       = "DeletionInProgress"
	// ReasonNotReady: deployed once, but a component is not available any more.
	ReasonNotReady = "ComponentsNotReady"
)

// Target is what an installation deploys, for the status.
type Target struct {
	Registry         string
	Version          string
	DeploymentID     string
	DeploymentConfig string
	OperatorVersion  string
}

// Target describes the installation for the KubeVirt's status.
func (in Install) Target(operatorVersion string) Target {
	config, id := in.DeploymentConfig()
	return Target{Registry: in.Registry, Version: in.Version, DeploymentID: id, DeploymentConfig: config, OperatorVersion: operatorVersion}
}

// DeploymentReady says whether a Deployment has rolled out its current template and all its
// replicas are available, and if not, what it waits for.
func DeploymentReady(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.ObservedGeneration < d.Generation:
		return false, "rollout not observed yet"
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d/%d updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return false, fmt.Sprintf("%d old replicas left", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < want:
		return false, fmt.Sprintf("%d/%d available", s.AvailableReplicas, want)
	}
	return true, ""
}

// DaemonSetReady says whether a DaemonSet runs its current template available on every node it
// should. As in KubeVirt, a DaemonSet that schedules on no node at all is not ready: VMs need
// a handler somewhere.
func DaemonSetReady(ds *appsv1.DaemonSet) (bool, string) {
	s := ds.Status
	switch {
	case s.ObservedGeneration < ds.Generation:
		return false, "rollout not observed yet"
	case s.DesiredNumberScheduled == 0:
		return false, "no node to run on"
	case s.UpdatedNumberScheduled < s.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d/%d updated", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	case s.NumberAvailable < s.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d/%d available", s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return true, ""
}

// Installed is the status of the honoured KubeVirt once every object is applied; notReady names
// the workloads that are not available yet, with what they wait for.
func Installed(kv *kubevirtv1.KubeVirt, t Target, notReady []string, now time.Time) kubevirtv1.KubeVirtStatus {
	s := *kv.Status.DeepCopy()
	s.OperatorVersion = t.OperatorVersion
	s.TargetKubeVirtRegistry, s.TargetKubeVirtVersion = t.Registry, t.Version
	s.TargetDeploymentID, s.TargetDeploymentConfig = t.DeploymentID, t.DeploymentConfig
	if s.Phase != kubevirtv1.KubeVirtPhaseDeployed {
		s.Phase = kubevirtv1.KubeVirtPhaseDeploying
	}
	c := conditions{list: s.Conditions, now: now}
	c.remove(kubevirtv1.KubeVirtConditionSynchronized)
	c.set(kubevirtv1.KubeVirtConditionCreated, corev1.ConditionTrue, ReasonCreated, "All resources were created.")
	waiting := ""
	if len(notReady) > 0 {
		sorted := slices.Clone(notReady)
		sort.Strings(sorted)
		waiting = ": waiting for " + strings.Join(sorted, ", ")
	}
	switch {
	case len(notReady) == 0:
		s.Phase = kubevirtv1.KubeVirtPhaseDeployed
		c.all(corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionFalse, ReasonReady, "All components are ready.")
		s.ObservedKubeVirtRegistry, s.ObservedKubeVirtVersion = t.Registry, t.Version
		s.ObservedDeploymentID, s.ObservedDeploymentConfig = t.DeploymentID, t.DeploymentConfig
		s.ObservedGeneration = ptr(kv.Generation)
	case s.ObservedDeploymentID != "" && s.ObservedDeploymentID != t.DeploymentID:
		// The previous version keeps serving while the new one rolls out.
		c.all(corev1.ConditionTrue, corev1.ConditionTrue, corev1.ConditionTrue, ReasonUpdating, fmt.Sprintf(
			"Transitioning from previous version %s with registry %s to target version %s using registry %s%s",
			s.ObservedKubeVirtVersion, s.ObservedKubeVirtRegistry, t.Version, t.Registry, waiting))
	case s.Phase == kubevirtv1.KubeVirtPhaseDeployed:
		c.all(corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionTrue, ReasonNotReady, "Components are not ready"+waiting)
	default:
		c.all(corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionFalse, ReasonDeploying,
			fmt.Sprintf("Deploying version %s with registry %s%s", t.Version, t.Registry, waiting))
	}
	s.Conditions = c.list
	return s
}

// Failed is the status after applying the objects failed; the phase stays.
func Failed(kv *kubevirtv1.KubeVirt, t Target, err error, now time.Time) kubevirtv1.KubeVirtStatus {
	s := *kv.Status.DeepCopy()
	s.OperatorVersion = t.OperatorVersion
	s.TargetKubeVirtRegistry, s.TargetKubeVirtVersion = t.Registry, t.Version
	s.TargetDeploymentID, s.TargetDeploymentConfig = t.DeploymentID, t.DeploymentConfig
	if s.Phase == "" {
		s.Phase = kubevirtv1.KubeVirtPhaseDeploying
	}
	msg := fmt.Sprintf("An error occurred during deployment: %v", err)
	c := conditions{list: s.Conditions, now: now}
	c.set(kubevirtv1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonFailed, msg)
	c.all(corev1.ConditionFalse, corev1.ConditionFalse, corev1.ConditionTrue, ReasonFailed, msg)
	s.Conditions = c.list
	return s
}

// Deleting is the status while the operator removes the installation; done when nothing is left.
func Deleting(kv *kubevirtv1.KubeVirt, err error, done bool, now time.Time) kubevirtv1.KubeVirtStatus {
	s := *kv.Status.DeepCopy()
	s.Phase = kubevirtv1.KubeVirtPhaseDeleting
	if done {
		s.Phase = kubevirtv1.KubeVirtPhaseDeleted
	}
	c := conditions{list: s.Conditions, now: now}
	c.remove(kubevirtv1.KubeVirtConditionCreated)
	c.remove(kubevirtv1.KubeVirtConditionSynchronized)
	c.all(corev1.ConditionFalse, corev1.ConditionFalse, corev1.ConditionTrue, ReasonDeleting, "Deletion was triggered")
	if err != nil {
		c.set(kubevirtv1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonDeletionFailed,
			fmt.Sprintf("An error occurred during deletion: %v", err))
	}
	s.Conditions = c.list
	return s
}

// Conflicting is the status of a KubeVirt that is not honoured because another one is. Only this
// condition is set, as KubeVirt does, so that tools reading Available ignore the resource.
func Conflicting(kv *kubevirtv1.KubeVirt, active string, now time.Time) kubevirtv1.KubeVirtStatus {
	s := *kv.Status.DeepCopy()
	c := conditions{list: s.Conditions, now: now}
	c.set(kubevirtv1.KubeVirtConditionSynchronized, corev1.ConditionFalse, ReasonExisting,
		"There is an active KubeVirt deployment: "+active)
	s.Conditions = c.list
	return s
}

// conditions edits a KubeVirt's conditions; like KubeVirt's, both times move when anything about
// a condition changes.
type conditions struct {
	list []kubevirtv1.KubeVirtCondition
	now  time.Time
}

func (c *conditions) set(t kubevirtv1.KubeVirtConditionType, status corev1.ConditionStatus, reason, msg string) {
	now := metav1.NewTime(c.now)
	for i := range c.list {
		if cur := &c.list[i]; cur.Type == t {
			if cur.Status != status || cur.Reason != reason || cur.Message != msg {
				cur.Status, cur.Reason, cur.Message = status, reason, msg
				cur.LastProbeTime, cur.LastTransitionTime = now, now
			}
			return
		}
	}
	c.list = append(c.list, kubevirtv1.KubeVirtCondition{
		Type: t, Status: status, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now,
	})
}

func (c *conditions) remove(t kubevirtv1.KubeVirtConditionType) {
	c.list = slices.DeleteFunc(c.list, func(x kubevirtv1.KubeVirtCondition) bool { return x.Type == t })
}

// all sets the three conditions HCO and KubeVirt's users read.
func (c *conditions) all(available, progressing, degraded corev1.ConditionStatus, reason, msg string) {
	c.set(kubevirtv1.KubeVirtConditionAvailable, available, reason, msg)
	c.set(kubevirtv1.KubeVirtConditionProgressing, progressing, reason, msg)
	c.set(kubevirtv1.KubeVirtConditionDegraded, degraded, reason, msg)
}

// Active picks the KubeVirt the operator honours among all of them: one it already installs
// (holds the finalizer), else the oldest; ties go by namespace and name. A KubeVirt on its way
// out without the finalizer never becomes active. Nil when there is none.
func Active(kvs []kubevirtv1.KubeVirt) *kubevirtv1.KubeVirt {
	var best *kubevirtv1.KubeVirt
	rank := func(kv *kubevirtv1.KubeVirt) int {
		if slices.Contains(kv.Finalizers, Finalizer) {
			return 0
		}
		return 1
	}
	for i := range kvs {
		kv := &kvs[i]
		if kv.DeletionTimestamp != nil && rank(kv) == 1 {
			continue
		}
		if best == nil || less(kv, best, rank) {
			best = kv
		}
	}
	return best
}

func less(a, b *kubevirtv1.KubeVirt, rank func(*kubevirtv1.KubeVirt) int) bool {
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra < rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
