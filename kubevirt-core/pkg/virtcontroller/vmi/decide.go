// Package vmi is virt-controller's VirtualMachineInstance controller: it runs every VMI in a
// virt-launcher Pod and drives the VMI through Pending, Scheduling and Scheduled as the Pod is
// created and placed. Running and later phases belong to virt-handler on the node.
//
// The decisions are pure functions of the VMI, its launcher Pods and the clock (this file and
// pod.go); the reconciler only reads objects and carries decisions out.
package vmi

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

// Action is what the controller does with the launcher Pods in one reconcile.
type Action int

const (
	// Nothing leaves the Pods as they are.
	Nothing Action = iota
	// CreatePod starts the launcher Pod.
	CreatePod
	// DeletePods removes every launcher Pod of a VMI being deleted.
	DeletePods
	// Release removes the VMI's finalizer: it is being deleted and no Pod is left.
	Release
)

func (a Action) String() string {
	return [...]string{"Nothing", "CreatePod", "DeletePods", "Release"}[a]
}

// Reasons on the Ready=False condition of a VMI whose Pod went away before the guest ran.
const (
	ReasonPodFailed = "PodFailed"
)

// PodScheduledCondition is the Pod condition KubeVirt mirrors onto a scheduling VMI, so that
// "Unschedulable" shows on the VMI and its VM.
const PodScheduledCondition = kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled)

// Decision is the action of one reconcile and the VMI's resulting status and node.
type Decision struct {
	Action Action
	Status kubevirtv1.VirtualMachineInstanceStatus
	// NodeName, when set, is written to the VMI's kubevirt.io/nodeName label.
	NodeName string
}

// controllerPhase reports whether the phase is one this controller drives. Running and after
// are virt-handler's; a finished VMI never changes again.
func controllerPhase(p kubevirtv1.VirtualMachineInstancePhase) bool {
	switch p {
	case kubevirtv1.VmPhaseUnset, kubevirtv1.Pending, kubevirtv1.Scheduling, kubevirtv1.Scheduled:
		return true
	}
	return false
}

// Decide chooses the next action and the VMI status from the VMI and all Pods labelled as its
// launchers, as the previous reconcile left them: a Pod created now shows in the next one.
func Decide(vmi *kubevirtv1.VirtualMachineInstance, pods []corev1.Pod, now time.Time) Decision {
	d := Decision{Status: *vmi.Status.DeepCopy()}
	if vmi.DeletionTimestamp != nil {
		for _, p := range pods {
			if p.DeletionTimestamp == nil {
				return Decision{Action: DeletePods, Status: d.Status}
			}
		}
		if len(pods) == 0 {
			d.Action = Release
		}
		// Otherwise wait for the terminating Pods to go.
		return d
	}
	if !controllerPhase(vmi.Status.Phase) {
		return d
	}
	pod := launcherpod.Current(pods)
	switch {
	case pod == nil && (vmi.Status.Phase == kubevirtv1.VmPhaseUnset || vmi.Status.Phase == kubevirtv1.Pending):
		d.Action = CreatePod
		d.Status.Phase = kubevirtv1.Pending
	case pod == nil:
		// The Pod was seen and is gone before the guest ran: nothing will ever run this VMI.
		fail(&d.Status, kubevirtv1.PodNotExistsReason, "virt-launcher pod disappeared before the VMI was running", now)
	case pod.DeletionTimestamp != nil:
		fail(&d.Status, kubevirtv1.PodTerminatingReason, "virt-launcher pod is terminating before the VMI was running", now)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		msg := "virt-launcher pod " + string(pod.Status.Phase) + " before the VMI was running"
		if pod.Status.Message != "" {
			msg += ": " + pod.Status.Message
		}
		fail(&d.Status, ReasonPodFailed, msg, now)
	case pod.Spec.NodeName != "":
		d.Status.Phase = kubevirtv1.Scheduled
		d.Status.NodeName = pod.Spec.NodeName
		d.NodeName = pod.Spec.NodeName
		// Placed: an earlier Unschedulable no longer holds.
		d.Status.Conditions = vmicond.Remove(d.Status.Conditions, PodScheduledCondition)
	default:
		d.Status.Phase = kubevirtv1.Scheduling
		d.Status.Conditions = syncPodScheduled(d.Status.Conditions, pod, now)
	}
	return d
}

func fail(st *kubevirtv1.VirtualMachineInstanceStatus, reason, msg string, now time.Time) {
	st.Phase = kubevirtv1.Failed
	st.Conditions = vmicond.Set(st.Conditions, kubevirtv1.VirtualMachineInstanceCondition{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
	}, now)
}

// syncPodScheduled mirrors a PodScheduled=False condition of the Pod (the scheduler's verdict)
// onto the VMI, and drops it once the Pod has none.
func syncPodScheduled(conds []kubevirtv1.VirtualMachineInstanceCondition, pod *corev1.Pod, now time.Time) []kubevirtv1.VirtualMachineInstanceCondition {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return vmicond.Set(conds, kubevirtv1.VirtualMachineInstanceCondition{
				Type: PodScheduledCondition, Status: c.Status, Reason: c.Reason, Message: c.Message,
				LastProbeTime: c.LastProbeTime, LastTransitionTime: c.LastTransitionTime,
			}, now)
		}
	}
	return vmicond.Remove(conds, PodScheduledCondition)
}
