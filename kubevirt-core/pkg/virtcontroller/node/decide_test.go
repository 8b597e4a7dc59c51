package node

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	timeout = 5 * time.Minute
	recheck = time.Minute
)

func nodeBeating(ago time.Duration, schedulable string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{}, Annotations: map[string]string{}}}
	if ago >= 0 {
		n.Annotations[kubevirtv1.VirtHandlerHeartbeat] = now.Add(-ago).Format(time.RFC3339)
	}
	if schedulable != "" {
		n.Labels[kubevirtv1.NodeSchedulable] = schedulable
	}
	return n
}

func vmiOn(name string, phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	v.Status.Phase = phase
	v.Status.NodeName = "n1"
	return v
}

func podOf(vmiName string, mut ...func(*corev1.Pod)) corev1.Pod {
	yes := true
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-" + vmiName, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmiName, UID: types.UID("uid-" + vmiName), Controller: &yes,
	}}}}
	p.Status.Phase = corev1.PodRunning
	for _, m := range mut {
		m(&p)
	}
	return p
}

func names(vmis []*kubevirtv1.VirtualMachineInstance) []string {
	var out []string
	for _, v := range vmis {
		out = append(out, v.Name)
	}
	return out
}

func TestDecide(t *testing.T) {
	vmis := []*kubevirtv1.VirtualMachineInstance{vmiOn("run", kubevirtv1.Running), vmiOn("sched", kubevirtv1.Scheduled), vmiOn("done", kubevirtv1.Succeeded)}
	exited := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
	}
	tests := []struct {
		name    string
		node    *corev1.Node
		pods    []corev1.Pod
		mark    bool
		fail    []string
		recheck time.Duration
	}{
		{name: "fresh heartbeat: recheck when it expires", node: nodeBeating(4*time.Minute+30*time.Second, "true"), recheck: 31 * time.Second},
		{name: "fresh heartbeat: recheck at the latest after the interval", node: nodeBeating(0, "true"), recheck: recheck},
		{name: "no heartbeat ever: not a virt-handler node", node: nodeBeating(-1, ""), recheck: recheck},
		{name: "stale heartbeat", node: nodeBeating(6*time.Minute, "true"), mark: true, fail: []string{"run", "sched"}, recheck: recheck},
		{name: "already unschedulable", node: nodeBeating(6*time.Minute, "false"), fail: []string{"run", "sched"}, recheck: recheck},
		{
			name: "a live launcher keeps its VMI", node: nodeBeating(6*time.Minute, "true"), mark: true,
			pods: []corev1.Pod{podOf("run"), podOf("sched", exited)}, fail: []string{"sched"}, recheck: recheck,
		},
		{
			name: "a finished launcher does not", node: nodeBeating(6*time.Minute, "false"),
			pods: []corev1.Pod{podOf("run", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}, fail: []string{"run", "sched"}, recheck: recheck,
		},
		{name: "deleted node", node: nil, fail: []string{"run", "sched"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Decide(tt.node, vmis, tt.pods, timeout, recheck, now)
			if err != nil {
				t.Fatal(err)
			}
			if d.MarkUnschedulable != tt.mark || !slices.Equal(names(d.Fail), tt.fail) || d.Recheck != tt.recheck {
				t.Errorf("got mark %v fail %v recheck %v, want %v %v %v", d.MarkUnschedulable, names(d.Fail), d.Recheck, tt.mark, tt.fail, tt.recheck)
			}
		})
	}
}

func TestMalformedHeartbeat(t *testing.T) {
	n := nodeBeating(-1, "true")
	n.Annotations[kubevirtv1.VirtHandlerHeartbeat] = "yesterday"
	if _, err := Decide(n, []*kubevirtv1.VirtualMachineInstance{vmiOn("run", kubevirtv1.Running)}, nil, timeout, recheck, now); err == nil {
		t.Error("malformed heartbeat accepted")
	}
}

func TestFailedStatus(t *testing.T) {
	v := vmiOn("run", kubevirtv1.Running)
	v.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{
		{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue},
		{Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionFalse},
	}
	st := FailedStatus(v, now)
	if st.Phase != kubevirtv1.Failed || st.Reason != ReasonNodeUnresponsive || len(st.Conditions) != 2 {
		t.Fatalf("status %+v", st)
	}
	c := st.Conditions[1]
	if c.Type != kubevirtv1.VirtualMachineInstanceReady || c.Status != corev1.ConditionFalse || c.Reason != ReasonNodeUnresponsive ||
		!c.LastTransitionTime.Equal(&metav1.Time{Time: now}) {
		t.Errorf("condition %+v", c)
	}
	if v.Status.Phase != kubevirtv1.Running || v.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Error("FailedStatus changed its input")
	}
}
