// Package node is virt-controller's node controller. virt-handler proves it is alive by writing
// the kubevirt.io/heartbeat annotation on its Node; when the heartbeat is older than the
// timeout, the controller takes the node out of VM scheduling (kubevirt.io/schedulable=false)
// and fails the VMIs on it that can no longer be running there, so that their VMs restart
// elsewhere.
//
// The decisions are pure functions of the Node, its VMIs and Pods and the clock (this file); the
// reconciler only reads objects and carries decisions out.
package node

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// ReasonNodeUnresponsive is KubeVirt's reason on a VMI failed because its node's virt-handler
// stopped answering.
const ReasonNodeUnresponsive = "NodeUnresponsive"

// Defaults as in KubeVirt.
const (
	DefaultHeartbeatTimeout = 5 * time.Minute
	DefaultRecheckInterval  = time.Minute
)

// Heartbeat reads virt-handler's last heartbeat. ok is false when the node never had one: a node
// without virt-handler is none of this controller's business.
func Heartbeat(node *corev1.Node) (t time.Time, ok bool, err error) {
	v, ok := node.Annotations[kubevirtv1.VirtHandlerHeartbeat]
	if !ok {
		return time.Time{}, false, nil
	}
	t, err = time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true, fmt.Errorf("node %s: heartbeat %q: %w", node.Name, v, err)
	}
	return t, true, nil
}

// Unresponsive reports whether the node's virt-handler is gone: the Node itself is gone (nil), or
// its heartbeat is older than timeout. expires is when a live heartbeat goes stale, zero if
// there is nothing to wait for.
func Unresponsive(node *corev1.Node, timeout time.Duration, now time.Time) (unresponsive bool, expires time.Time, err error) {
	if node == nil {
		return true, time.Time{}, nil
	}
	hb, ok, err := Heartbeat(node)
	if err != nil || !ok {
		return false, time.Time{}, err
	}
	expires = hb.Add(timeout)
	if now.After(expires) {
		return true, time.Time{}, nil
	}
	return false, expires, nil
}

// Schedulable reports whether VMs may be placed on the node: virt-handler labels it so.
func Schedulable(node *corev1.Node) bool {
	return node != nil && node.Labels[kubevirtv1.NodeSchedulable] == "true"
}

// Decision is what one reconcile does about a node.
type Decision struct {
	// MarkUnschedulable sets kubevirt.io/schedulable=false on the Node.
	MarkUnschedulable bool
	// Fail lists the VMIs to move to Failed.
	Fail []*kubevirtv1.VirtualMachineInstance
	// Recheck is when to look again, zero for never (the Node is gone).
	Recheck time.Duration
}

// Decide chooses what to do about a node (nil when it was deleted), given the VMIs whose
// status.nodeName names it and, when it is unresponsive, the Pods bound to it. A VMI whose
// launcher Pod is still alive is not failed, as in KubeVirt: the guest may still run there, and
// a failed VMI lets its VM start a second copy on another node, both writing the same disks.
// Once the Pod is gone (the node lifecycle controller evicts it) the VMI is failed.
func Decide(node *corev1.Node, vmis []*kubevirtv1.VirtualMachineInstance, pods []corev1.Pod,
	timeout, recheck time.Duration, now time.Time) (Decision, error) {
	var d Decision
	unresponsive, expires, err := Unresponsive(node, timeout, now)
	if err != nil {
		// A malformed heartbeat proves nothing either way; virt-handler's next one fixes it.
		return d, err
	}
	if node != nil {
		d.Recheck = recheck
		if !expires.IsZero() {
			// Wake up right when the heartbeat goes stale, not up to a whole interval later.
			d.Recheck = min(recheck, expires.Sub(now)+time.Second)
		}
	}
	if !unresponsive {
		return d, nil
	}
	d.MarkUnschedulable = Schedulable(node)
	alive := map[types.UID]bool{}
	for i := range pods {
		if uid, ok := aliveLauncher(&pods[i]); ok {
			alive[uid] = true
		}
	}
	for _, vmi := range vmis {
		if vmi.IsFinal() || alive[vmi.UID] {
			continue
		}
		d.Fail = append(d.Fail, vmi)
	}
	return d, nil
}

// aliveLauncher returns the UID of the VMI controlling the Pod, if the Pod may still run a guest:
// it has not finished, and not all of its containers have terminated (a Pod can hang in
// termination while nothing runs in it any more).
func aliveLauncher(p *corev1.Pod) (types.UID, bool) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != kubevirtv1.VirtualMachineInstanceGroupVersionKind.Kind {
		return "", false
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return "", false
	}
	if n := len(p.Status.ContainerStatuses); n > 0 {
		terminated := 0
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Terminated != nil {
				terminated++
			}
		}
		if terminated == n {
			return "", false
		}
	}
	return ref.UID, true
}

// FailedStatus is the VMI's status once failed for its node: phase Failed, status.reason as
// KubeVirt writes it, and a Ready=False condition saying why.
func FailedStatus(vmi *kubevirtv1.VirtualMachineInstance, now time.Time) kubevirtv1.VirtualMachineInstanceStatus {
	st := *vmi.Status.DeepCopy()
	st.Phase = kubevirtv1.Failed
	st.Reason = ReasonNodeUnresponsive
	c := kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: ReasonNodeUnresponsive,
		Message:            fmt.Sprintf("virt-handler on node %s is not responsive, marking VMI as failed", vmi.Status.NodeName),
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	}
	for i, old := range st.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
			st.Conditions = append(st.Conditions[:i:i], st.Conditions[i+1:]...)
			break
		}
	}
	st.Conditions = append(st.Conditions, c)
	return st
}
