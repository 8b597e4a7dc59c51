package vmi

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func inPhase(p kubevirtv1.VirtualMachineInstancePhase, mut ...func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
	return newVMI(append([]func(*kubevirtv1.VirtualMachineInstance){func(vmi *kubevirtv1.VirtualMachineInstance) { vmi.Status.Phase = p }}, mut...)...)
}

func deletedVMI(vmi *kubevirtv1.VirtualMachineInstance) {
	t := metav1.NewTime(now)
	vmi.DeletionTimestamp = &t
}

func launcher(mut ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-demo-abcde", UID: "pod-uid"}}
	p.Status.Phase = corev1.PodPending
	for _, m := range mut {
		m(&p)
	}
	return p
}

var (
	bound       = func(p *corev1.Pod) { p.Spec.NodeName = "node1" }
	podDeleting = func(p *corev1.Pod) { t := metav1.NewTime(now); p.DeletionTimestamp = &t }
	podFailed   = func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed; p.Status.Message = "OOMKilled" }
	unschedulab = func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/0 nodes are available", LastTransitionTime: metav1.NewTime(now.Add(-time.Minute)),
		}}
	}
)

func pods(ps ...corev1.Pod) []corev1.Pod { return ps }

func TestDecide(t *testing.T) {
	tests := []struct {
		name       string
		vmi        *kubevirtv1.VirtualMachineInstance
		pods       []corev1.Pod
		action     Action
		phase      kubevirtv1.VirtualMachineInstancePhase
		node       string
		readyWhy   string // reason of a Ready=False condition, "" for none
		scheduled  corev1.ConditionStatus
		unschedMsg string
	}{
		{name: "new VMI gets a Pod", vmi: inPhase(""), action: CreatePod, phase: kubevirtv1.Pending},
		{name: "pending without Pod retries", vmi: inPhase(kubevirtv1.Pending), action: CreatePod, phase: kubevirtv1.Pending},
		{name: "pod created: scheduling", vmi: inPhase(kubevirtv1.Pending), pods: pods(launcher()), phase: kubevirtv1.Scheduling},
		{name: "unprocessed VMI with a Pod: scheduling", vmi: inPhase(""), pods: pods(launcher()), phase: kubevirtv1.Scheduling},
		{name: "unschedulable is mirrored", vmi: inPhase(kubevirtv1.Scheduling), pods: pods(launcher(unschedulab)), phase: kubevirtv1.Scheduling,
			scheduled: corev1.ConditionFalse, unschedMsg: "0/0 nodes are available"},
		{name: "bound: scheduled", vmi: inPhase(kubevirtv1.Scheduling), pods: pods(launcher(bound)), phase: kubevirtv1.Scheduled, node: "node1"},
		{name: "scheduled stays", vmi: inPhase(kubevirtv1.Scheduled), pods: pods(launcher(bound)), phase: kubevirtv1.Scheduled, node: "node1"},
		{name: "pod gone while scheduling", vmi: inPhase(kubevirtv1.Scheduling), phase: kubevirtv1.Failed, readyWhy: kubevirtv1.PodNotExistsReason},
		{name: "pod gone once scheduled", vmi: inPhase(kubevirtv1.Scheduled), phase: kubevirtv1.Failed, readyWhy: kubevirtv1.PodNotExistsReason},
		{name: "pod failed", vmi: inPhase(kubevirtv1.Scheduled), pods: pods(launcher(bound, podFailed)), phase: kubevirtv1.Failed, readyWhy: ReasonPodFailed},
		{name: "pod terminating", vmi: inPhase(kubevirtv1.Scheduling), pods: pods(launcher(podDeleting)), phase: kubevirtv1.Failed, readyWhy: kubevirtv1.PodTerminatingReason},
		{name: "running is virt-handler's", vmi: inPhase(kubevirtv1.Running), phase: kubevirtv1.Running},
		{name: "failed is final", vmi: inPhase(kubevirtv1.Failed), phase: kubevirtv1.Failed},
		{name: "deleted VMI deletes its Pod", vmi: inPhase(kubevirtv1.Scheduling, deletedVMI), pods: pods(launcher()), action: DeletePods, phase: kubevirtv1.Scheduling},
		{name: "deleted VMI waits for a terminating Pod", vmi: inPhase(kubevirtv1.Running, deletedVMI), pods: pods(launcher(bound, podDeleting)), phase: kubevirtv1.Running},
		{name: "deleted VMI without Pods is released", vmi: inPhase(kubevirtv1.Scheduling, deletedVMI), action: Release, phase: kubevirtv1.Scheduling},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.vmi, tc.pods, now)
			if d.Action != tc.action || d.Status.Phase != tc.phase || d.NodeName != tc.node || d.Status.NodeName != tc.node {
				t.Errorf("Decide = %s phase %q node %q/%q, want %s %q %q", d.Action, d.Status.Phase, d.NodeName, d.Status.NodeName, tc.action, tc.phase, tc.node)
			}
			ready := condition(d.Status.Conditions, kubevirtv1.VirtualMachineInstanceReady)
			if tc.readyWhy == "" && ready != nil || tc.readyWhy != "" && (ready == nil || ready.Status != corev1.ConditionFalse || ready.Reason != tc.readyWhy || ready.Message == "") {
				t.Errorf("Ready condition %+v, want reason %q", ready, tc.readyWhy)
			}
			sched := condition(d.Status.Conditions, PodScheduledCondition)
			if tc.scheduled == "" && sched != nil || tc.scheduled != "" && (sched == nil || sched.Status != tc.scheduled ||
				sched.Reason != corev1.PodReasonUnschedulable || sched.Message != tc.unschedMsg) {
				t.Errorf("PodScheduled condition %+v", sched)
			}
		})
	}
}

func TestDecideDoesNotChurn(t *testing.T) {
	vmi := inPhase(kubevirtv1.Scheduling)
	first := Decide(vmi, pods(launcher(unschedulab)), now)
	vmi.Status = first.Status
	again := Decide(vmi, pods(launcher(unschedulab)), now.Add(time.Hour))
	if len(again.Status.Conditions) != 1 || !again.Status.Conditions[0].LastTransitionTime.Equal(&first.Status.Conditions[0].LastTransitionTime) {
		t.Errorf("conditions changed on a repeat: %+v then %+v", first.Status.Conditions, again.Status.Conditions)
	}
	vmi.Status = again.Status
	placed := Decide(vmi, pods(launcher(bound)), now)
	if condition(placed.Status.Conditions, PodScheduledCondition) != nil {
		t.Errorf("Unschedulable kept after binding: %+v", placed.Status.Conditions)
	}
	failed := Decide(inPhase(kubevirtv1.Scheduling), nil, now)
	vmi.Status = failed.Status
	if again := Decide(vmi, nil, now.Add(time.Hour)); again.Status.Phase != kubevirtv1.Failed || !again.Status.Conditions[0].LastTransitionTime.Equal(&failed.Status.Conditions[0].LastTransitionTime) {
		t.Errorf("failed VMI changed: %+v", again.Status)
	}
}

func condition(conds []kubevirtv1.VirtualMachineInstanceCondition, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
