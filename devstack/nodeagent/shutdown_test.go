package nodeagent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShutdownStatus(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	now := metav1.NewTime(started.Add(time.Hour))
	yes := true
	running := corev1.ContainerStatus{Name: "main", Ready: true, Started: &yes, ContainerID: "d8v://a",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
	initDone := corev1.ContainerStatus{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}
	waiting := corev1.ContainerStatus{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	gate := corev1.PodCondition{Type: "example.com/gate", Status: corev1.ConditionTrue}
	pod := func(inits []corev1.ContainerStatus, ctrs []corev1.ContainerStatus, conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}, ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate.Type}}}}
		if len(inits) > 0 {
			p.Spec.InitContainers = []corev1.Container{{Name: "init"}}
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.213.0.9", StartTime: &started,
			InitContainerStatuses: inits, ContainerStatuses: ctrs,
			Conditions: append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, conds...)}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"running and ready", pod(nil, []corev1.ContainerStatus{running}, gate)},
		{"after an init container", pod([]corev1.ContainerStatus{initDone}, []corev1.ContainerStatus{running}, gate)},
		{"crash-looping", pod(nil, []corev1.ContainerStatus{waiting}, gate)},
		{"an eviction's disruption condition is replaced", pod(nil, []corev1.ContainerStatus{running}, gate,
			corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ShutdownStatus(tc.pod, now)
			if st.Phase != corev1.PodFailed || st.Reason != reasonNodeShutdown || st.Message != messageNodeShutdown {
				t.Errorf("phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
			}
			for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
				if c := findCondition(st.Conditions, ct); c == nil || c.Status != corev1.ConditionFalse {
					t.Errorf("condition %s: %+v, want False", ct, c)
				}
			}
			n := 0
			for _, c := range st.Conditions {
				if c.Type == corev1.DisruptionTarget {
					n++
					if c.Status != corev1.ConditionTrue || c.Reason != reasonTerminationByKubelet {
						t.Errorf("DisruptionTarget %+v", c)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d DisruptionTarget conditions", n)
			}
			if findCondition(st.Conditions, gate.Type) == nil {
				t.Error("the readiness gate's condition was dropped")
			}
			if st.PodIP != tc.pod.Status.PodIP || st.StartTime == nil || !st.StartTime.Equal(&started) {
				t.Errorf("pod IP %q start %v not kept", st.PodIP, st.StartTime)
			}
			for _, cs := range st.ContainerStatuses {
				term := cs.State.Terminated
				if term == nil || term.ExitCode != exitKilled || !term.FinishedAt.Equal(&now) || cs.Ready || cs.Started == nil || *cs.Started {
					t.Errorf("container %s: %+v", cs.Name, cs)
				}
			}
			for _, cs := range st.InitContainerStatuses {
				if term := cs.State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
					t.Errorf("init container %s: %+v, want its completion kept", cs.Name, cs.State)
				}
			}
			if tc.pod.Status.Phase != corev1.PodRunning || tc.pod.Status.ContainerStatuses[0].State.Terminated != nil {
				t.Error("ShutdownStatus changed the pod it was given")
			}
		})
	}
}
