package nodeagent

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func running(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func exited(name string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func backingOff(name string, lastCode int32) corev1.ContainerStatus {
	s := waiting(name, "CrashLoopBackOff")
	s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: lastCode}
	return s
}

func specWith(policy corev1.RestartPolicy, inits []string, ctrs ...string) *corev1.PodSpec {
	s := &corev1.PodSpec{RestartPolicy: policy}
	for _, n := range inits {
		s.InitContainers = append(s.InitContainers, corev1.Container{Name: n})
	}
	for _, n := range ctrs {
		s.Containers = append(s.Containers, corev1.Container{Name: n})
	}
	return s
}

func TestPodPhase(t *testing.T) {
	type S = []corev1.ContainerStatus
	never, always, onFailure := corev1.RestartPolicyNever, corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure
	for _, tc := range []struct {
		name     string
		spec     *corev1.PodSpec
		inits    S
		ctrs     S
		terminal bool
		want     corev1.PodPhase
	}{
		{"nothing started", specWith(always, nil, "a"), nil, S{waiting("a", "ContainerCreating")}, false, corev1.PodPending},
		{"no statuses yet", specWith(always, nil, "a"), nil, nil, false, corev1.PodPending},
		{"init running", specWith(always, []string{"i"}, "a"), S{running("i", false)}, S{waiting("a", "PodInitializing")}, false, corev1.PodPending},
		{"init done, running", specWith(always, []string{"i"}, "a"), S{exited("i", 0)}, S{running("a", true)}, false, corev1.PodRunning},
		{"init failed, Never", specWith(never, []string{"i"}, "a"), S{exited("i", 1)}, S{waiting("a", "PodInitializing")}, false, corev1.PodFailed},
		{"init failed, Always retries", specWith(always, []string{"i"}, "a"), S{backingOff("i", 1)}, S{waiting("a", "PodInitializing")}, false, corev1.PodPending},
		{"one running one waiting", specWith(always, nil, "a", "b"), nil, S{running("a", true), waiting("b", "ContainerCreating")}, false, corev1.PodPending},
		{"all running", specWith(never, nil, "a", "b"), nil, S{running("a", true), running("b", false)}, false, corev1.PodRunning},
		{"one exited one running", specWith(never, nil, "a", "b"), nil, S{exited("a", 3), running("b", true)}, false, corev1.PodRunning},
		{"all succeeded, Never", specWith(never, nil, "a", "b"), nil, S{exited("a", 0), exited("b", 0)}, false, corev1.PodSucceeded},
		{"one failed, Never", specWith(never, nil, "a", "b"), nil, S{exited("a", 0), exited("b", 2)}, false, corev1.PodFailed},
		{"all succeeded, OnFailure", specWith(onFailure, nil, "a"), nil, S{exited("a", 0)}, false, corev1.PodSucceeded},
		{"failed, OnFailure restarts", specWith(onFailure, nil, "a"), nil, S{backingOff("a", 1)}, false, corev1.PodRunning},
		{"exited, Always restarts", specWith(always, nil, "a"), nil, S{exited("a", 0)}, false, corev1.PodRunning},
		{"crash loop, Always", specWith(always, nil, "a"), nil, S{backingOff("a", 137)}, false, corev1.PodRunning},
		{"deleted, all exited 0", specWith(always, nil, "a"), nil, S{exited("a", 0)}, true, corev1.PodSucceeded},
		{"deleted, killed", specWith(always, nil, "a", "b"), nil, S{exited("a", 0), exited("b", 143)}, true, corev1.PodFailed},
		{"deleted before start", specWith(always, nil, "a"), nil, S{waiting("a", "ContainerCreating")}, true, corev1.PodFailed},
		{"deleted during init", specWith(never, []string{"i"}, "a"), S{exited("i", 143)}, S{waiting("a", "PodInitializing")}, true, corev1.PodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodPhase(tc.spec, tc.inits, tc.ctrs, tc.terminal); got != tc.want {
				t.Errorf("phase %s, want %s", got, tc.want)
			}
		})
	}
}

func cond(pod corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	return findCondition(pod.Conditions, t)
}

func TestComputeStatusConditions(t *testing.T) {
	earlier := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	gate := corev1.PodConditionType("kubevirt.io/virtual-machine-unpaused")
	gated := func(conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{Spec: *specWith(corev1.RestartPolicyNever, nil, "compute")}
		p.Generation = 3
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
		p.Status.Conditions = conds
		p.Status.QOSClass = corev1.PodQOSBurstable
		return p
	}
	live := PodRuntimeStatus{PodIP: "10.213.0.9", HostIP: "10.213.0.1", SandboxReady: true,
		Containers: []corev1.ContainerStatus{running("compute", true)}}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		rt         PodRuntimeStatus
		wantPhase  corev1.PodPhase
		wantReady  corev1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{name: "gate missing", pod: gated(), rt: live, wantPhase: corev1.PodRunning, wantReady: corev1.ConditionFalse,
			wantReason: reasonReadinessGatesNotReady, wantMsg: `corresponding condition of pod readiness gate "kubevirt.io/virtual-machine-unpaused" does not exist.`},
		{name: "gate false", pod: gated(corev1.PodCondition{Type: gate, Status: corev1.ConditionFalse}), rt: live,
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionFalse, wantReason: reasonReadinessGatesNotReady,
			wantMsg: `the status of pod readiness gate "kubevirt.io/virtual-machine-unpaused" is not "True", but False`},
		{name: "gate true", pod: gated(corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue}), rt: live,
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue},
		{name: "gate true but container unready", pod: gated(corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue}),
			rt:        PodRuntimeStatus{SandboxReady: true, Containers: []corev1.ContainerStatus{running("compute", false)}},
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionFalse, wantReason: reasonContainersNotReady,
			wantMsg: "containers with unready status: [compute]"},
		{name: "succeeded", pod: gated(corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue}),
			rt:        PodRuntimeStatus{Containers: []corev1.ContainerStatus{exited("compute", 0)}},
			wantPhase: corev1.PodSucceeded, wantReady: corev1.ConditionFalse, wantReason: reasonPodCompleted},
		{name: "lost", pod: gated(corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue}),
			rt: PodRuntimeStatus{Terminal: true, Reason: "ProcessesGone", Message: "gone",
				Containers: []corev1.ContainerStatus{exited("compute", 137)}},
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantReason: reasonPodFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ComputeStatus(tc.pod, tc.rt, now)
			if st.Phase != tc.wantPhase {
				t.Errorf("phase %s, want %s", st.Phase, tc.wantPhase)
			}
			r := cond(st, corev1.PodReady)
			if r == nil || r.Status != tc.wantReady || r.Reason != tc.wantReason || r.Message != tc.wantMsg {
				t.Errorf("Ready = %+v, want %s %q %q", r, tc.wantReady, tc.wantReason, tc.wantMsg)
			}
			// The gate's own condition is never dropped or changed.
			if want := findCondition(tc.pod.Status.Conditions, gate); want != nil {
				if got := cond(st, gate); got == nil || got.Status != want.Status {
					t.Errorf("gate condition %+v, want %+v", got, want)
				}
			}
			for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReadyToStartContainers} {
				if c := cond(st, ct); c == nil || c.ObservedGeneration != 3 {
					t.Errorf("condition %s missing or without observedGeneration: %+v", ct, c)
				}
			}
			if st.QOSClass != corev1.PodQOSBurstable {
				t.Errorf("qosClass %q was not kept", st.QOSClass)
			}
			if tc.rt.Message != "" && (st.Message != tc.rt.Message || st.Reason != tc.rt.Reason) {
				t.Errorf("reason/message %q/%q", st.Reason, st.Message)
			}
		})
	}

	// Transition times move only when a condition's status does.
	pod := gated(corev1.PodCondition{Type: gate, Status: corev1.ConditionTrue},
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: earlier},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: earlier})
	st := ComputeStatus(pod, live, now)
	if got := cond(st, corev1.PodReady).LastTransitionTime; !got.Equal(&earlier) {
		t.Errorf("unchanged Ready moved its transition time to %v", got)
	}
	if got := cond(st, corev1.ContainersReady).LastTransitionTime; !got.Equal(&now) {
		t.Errorf("changed ContainersReady kept transition time %v", got)
	}
	if st.PodIP != "10.213.0.9" || len(st.PodIPs) != 1 || st.HostIP != "10.213.0.1" || len(st.HostIPs) != 1 {
		t.Errorf("addresses %q %v %q %v", st.PodIP, st.PodIPs, st.HostIP, st.HostIPs)
	}
}

func TestInitializedCondition(t *testing.T) {
	spec := specWith(corev1.RestartPolicyAlways, []string{"a", "b"}, "c")
	for _, tc := range []struct {
		name  string
		inits []corev1.ContainerStatus
		want  corev1.ConditionStatus
		msg   string
	}{
		{"none started", nil, corev1.ConditionFalse, "containers with unknown status: [a b]"},
		{"first done", []corev1.ContainerStatus{exited("a", 0), running("b", false)}, corev1.ConditionFalse, "containers with incomplete status: [b]"},
		{"first failed", []corev1.ContainerStatus{backingOff("a", 1), waiting("b", "PodInitializing")}, corev1.ConditionFalse, "containers with incomplete status: [a b]"},
		{"all done", []corev1.ContainerStatus{exited("a", 0), exited("b", 0)}, corev1.ConditionTrue, ""},
	} {
		c := initializedCondition(spec, tc.inits, corev1.PodPending)
		if c.Status != tc.want || c.Message != tc.msg {
			t.Errorf("%s: %s %q, want %s %q", tc.name, c.Status, c.Message, tc.want, tc.msg)
		}
	}
}

// A status computed before another controller flipped a readiness gate must not undo the flip
// when it is written: the writer merges the live conditions and re-evaluates Ready.
func TestMergeForeignConditions(t *testing.T) {
	gate := corev1.PodConditionType("example.com/gate")
	spec := specWith(corev1.RestartPolicyAlways, nil, "a")
	spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	now := metav1.Now()
	stale := &corev1.Pod{Spec: *spec}
	stale.Status.Conditions = []corev1.PodCondition{{Type: gate, Status: corev1.ConditionFalse}}
	st := ComputeStatus(stale, PodRuntimeStatus{SandboxReady: true, Containers: []corev1.ContainerStatus{running("a", true)}}, now)
	if cond(st, corev1.PodReady).Status != corev1.ConditionFalse {
		t.Fatal("precondition: Ready should be False with the gate False")
	}
	live := []corev1.PodCondition{
		{Type: gate, Status: corev1.ConditionTrue},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse},
	}
	MergeForeignConditions(spec, &st, live, now)
	if g := cond(st, gate); g == nil || g.Status != corev1.ConditionTrue {
		t.Errorf("gate condition after merge: %+v", g)
	}
	if cond(st, corev1.DisruptionTarget) == nil {
		t.Error("foreign DisruptionTarget condition dropped")
	}
	if r := cond(st, corev1.PodReady); r.Status != corev1.ConditionTrue || r.Reason != "" {
		t.Errorf("Ready after merge: %+v", r)
	}
	n := 0
	for _, c := range st.Conditions {
		if c.Type == gate {
			n++
		}
	}
	if n != 1 {
		t.Errorf("gate condition appears %d times", n)
	}
	if !strings.Contains(gateConditions(&corev1.Pod{Spec: *spec, Status: corev1.PodStatus{Conditions: live}}), "example.com/gate=True") {
		t.Error("gateConditions does not see the gate")
	}
}
