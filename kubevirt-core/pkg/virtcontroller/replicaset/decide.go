// Package replicaset is virt-controller's VirtualMachineInstanceReplicaSet controller: it keeps
// spec.replicas active VMIs made from the template, replaces finished ones, and reports replicas,
// ready replicas and the label selector that the scale subresource (kubectl scale, HPA) reads.
//
// The decisions are pure functions of the replica set, the VMIs it controls and the clock (this
// file and vmi.go); the reconciler only reads objects and carries decisions out.
package replicaset

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// DefaultBurstReplicas is KubeVirt's cap on the VMIs created or deleted in one pass, so that a
// large scale step does not flood the apiserver; the next reconcile does the rest.
const DefaultBurstReplicas = 250

// Reasons of the ReplicaFailure and ReplicaPaused conditions, as KubeVirt writes them.
const (
	ReasonFailedCreate = "FailedCreate"
	ReasonFailedDelete = "FailedDelete"
	ReasonPaused       = "Paused"
	pausedMessage      = "Controller got paused"
)

// Plan is what one reconcile does to the VMIs.
type Plan struct {
	// Create is the number of VMIs to create.
	Create int
	// Delete lists the VMIs to delete: surplus active ones and every finished one.
	Delete []*kubevirtv1.VirtualMachineInstance
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return p.Create == 0 && len(p.Delete) == 0 }

// Selector parses the replica set's selector and checks that the template's labels match it: a
// VMI that the replica set would not select as its own would be created again and again. The
// webhook rejects such replica sets; one that predates it is left alone.
func Selector(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) (labels.Selector, error) {
	if rs.Spec.Selector == nil || rs.Spec.Template == nil || len(rs.Spec.Template.ObjectMeta.Labels) == 0 {
		return nil, errors.New("replica set needs a selector and a template with labels")
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("parse selector: %w", err)
	}
	if !sel.Matches(labels.Set(rs.Spec.Template.ObjectMeta.Labels)) {
		return nil, errors.New("selector does not match template labels")
	}
	return sel, nil
}

// Replicas is the desired count: spec.replicas, defaulting to 1 as in KubeVirt.
func Replicas(rs *kubevirtv1.VirtualMachineInstanceReplicaSet) int {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return int(*rs.Spec.Replicas)
}

// Active reports whether a VMI counts towards the replicas: not finished, not being deleted and
// not losing its Pod (Ready=False with PodTerminating means the guest is on its way out).
func Active(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return !vmi.IsFinal() && vmi.DeletionTimestamp == nil &&
		!hasCondition(vmi, kubevirtv1.VirtualMachineInstanceReady, corev1.ConditionFalse, kubevirtv1.PodTerminatingReason)
}

// Ready reports whether a VMI is Ready, the readiness KubeVirt counts in readyReplicas.
func Ready(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return hasCondition(vmi, kubevirtv1.VirtualMachineInstanceReady, corev1.ConditionTrue, "")
}

// stale reports whether a VMI will never run again but still exists: KubeVirt deletes those so
// that the replica set's VMIs do not pile up.
func stale(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.DeletionTimestamp == nil && !Active(vmi)
}

func hasCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType, s corev1.ConditionStatus, reason string) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t && c.Status == s && (reason == "" || c.Reason == reason) {
			return true
		}
	}
	return false
}

// Decide plans one reconcile from the VMIs the replica set controls. A paused or deleted replica
// set changes nothing, so that a user can add or remove VMIs by hand. burst caps creations and
// deletions in one pass; 0 means DefaultBurstReplicas.
func Decide(rs *kubevirtv1.VirtualMachineInstanceReplicaSet, vmis []*kubevirtv1.VirtualMachineInstance, burst int) Plan {
	if rs.Spec.Paused || rs.DeletionTimestamp != nil {
		return Plan{}
	}
	if burst <= 0 {
		burst = DefaultBurstReplicas
	}
	var active, finished []*kubevirtv1.VirtualMachineInstance
	for _, vmi := range vmis {
		switch {
		case Active(vmi):
			active = append(active, vmi)
		case stale(vmi):
			finished = append(finished, vmi)
		}
	}
	var p Plan
	diff := len(active) - Replicas(rs)
	switch {
	case diff < 0:
		p.Create = min(-diff, burst)
	case diff > 0:
		p.Delete = DeletionOrder(active)[:min(diff, burst)]
	}
	// KubeVirt cleans finished VMIs only once scaling has nothing left to do, within the same burst.
	if diff <= 0 && len(finished) > 0 {
		p.Delete = append(p.Delete, finished[:min(len(finished), burst)]...)
	}
	return p
}

// DeletionOrder sorts VMIs cheapest to lose first: a VMI that is not yet running has no guest
// state to lose, a running one that is not ready serves nobody yet; among equals the youngest
// goes first, as a Deployment's ReplicaSet does, and the name breaks the last tie so that
// repeated reconciles agree.
func DeletionOrder(vmis []*kubevirtv1.VirtualMachineInstance) []*kubevirtv1.VirtualMachineInstance {
	out := slices.Clone(vmis)
	slices.SortStableFunc(out, func(a, b *kubevirtv1.VirtualMachineInstance) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}

func rank(vmi *kubevirtv1.VirtualMachineInstance) int {
	switch {
	case vmi.Status.Phase != kubevirtv1.Running:
		return 0
	case !Ready(vmi):
		return 1
	}
	return 2
}

// Status computes the replica set's status from the VMIs it controls after this reconcile's
// plan was decided, and the error of carrying it out. Conditions keep their transition time
// while they hold.
func Status(rs *kubevirtv1.VirtualMachineInstanceReplicaSet, vmis []*kubevirtv1.VirtualMachineInstance, sel labels.Selector,
	plan Plan, scaleErr error, now time.Time) kubevirtv1.VirtualMachineInstanceReplicaSetStatus {
	st := *rs.Status.DeepCopy()
	st.Replicas, st.ReadyReplicas = 0, 0
	for _, vmi := range vmis {
		if Active(vmi) {
			st.Replicas++
			if Ready(vmi) {
				st.ReadyReplicas++
			}
		}
	}
	if sel != nil {
		st.LabelSelector = sel.String()
	}
	if rs.Spec.Paused {
		st.Conditions = setCondition(st.Conditions, kubevirtv1.VirtualMachineInstanceReplicaSetCondition{
			Type: kubevirtv1.VirtualMachineInstanceReplicaSetReplicaPaused, Status: corev1.ConditionTrue,
			Reason: ReasonPaused, Message: pausedMessage,
		}, now)
	} else {
		st.Conditions = removeCondition(st.Conditions, kubevirtv1.VirtualMachineInstanceReplicaSetReplicaPaused)
	}
	if scaleErr != nil {
		reason := ReasonFailedDelete
		if plan.Create > 0 {
			reason = ReasonFailedCreate
		}
		st.Conditions = setCondition(st.Conditions, kubevirtv1.VirtualMachineInstanceReplicaSetCondition{
			Type: kubevirtv1.VirtualMachineInstanceReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			Reason: reason, Message: scaleErr.Error(),
		}, now)
	} else {
		st.Conditions = removeCondition(st.Conditions, kubevirtv1.VirtualMachineInstanceReplicaSetReplicaFailure)
	}
	return st
}

func setCondition(conds []kubevirtv1.VirtualMachineInstanceReplicaSetCondition, c kubevirtv1.VirtualMachineInstanceReplicaSetCondition, now time.Time) []kubevirtv1.VirtualMachineInstanceReplicaSetCondition {
	out := make([]kubevirtv1.VirtualMachineInstanceReplicaSetCondition, 0, len(conds)+1)
	found := false
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		found = true
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
		out = append(out, c)
	}
	if !found {
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		out = append(out, c)
	}
	return out
}

func removeCondition(conds []kubevirtv1.VirtualMachineInstanceReplicaSetCondition, t kubevirtv1.VirtualMachineInstanceReplicaSetConditionType) []kubevirtv1.VirtualMachineInstanceReplicaSetCondition {
	var out []kubevirtv1.VirtualMachineInstanceReplicaSetCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
