package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/d8virt/devstack/nodeagent"
)

// How containers and pods live and end: exit codes, restarts, deletion, readiness gates, an agent
// restart and the cleanup of a stopped node.

// Exit codes and termination messages, a program that does not exist, and a Failed pod.
func (s *nodeAgentSuite) testExitCodes(t *testing.T) {
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fail"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{
				busybox("ok", "echo fine"),
				busybox("bad", `echo "disk on fire" > /dev/termination-log; echo failing; exit 3`),
				func() corev1.Container {
					c := busybox("fallback", "echo last words from the log; exit 4")
					c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
					return c
				}(),
			},
		},
	})
	pod := s.waitPod(t, "fail", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	for name, want := range map[string]struct {
		code           int32
		reason, prefix string
	}{
		"ok": {0, "Completed", ""}, "bad": {3, "Error", "disk on fire"}, "fallback": {4, "Error", "last words from the log"},
	} {
		st := ctrStatus(pod, name)
		if st == nil || st.State.Terminated == nil {
			t.Errorf("%s: %+v", name, st)
			continue
		}
		term := st.State.Terminated
		if term.ExitCode != want.code || term.Reason != want.reason || !strings.HasPrefix(term.Message, want.prefix) ||
			term.StartedAt.IsZero() || term.FinishedAt.IsZero() {
			t.Errorf("%s terminated %+v, want exit %d %s %q", name, term, want.code, want.reason, want.prefix)
		}
		if st.RestartCount != 0 {
			t.Errorf("%s restarted under restartPolicy Never", name)
		}
	}
	if c := podCond(pod, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("ContainersReady %+v", c)
	}

	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "noexec"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
			{Name: "main", Image: "registry.example/d8v/no-such-program:dev"},
		}},
	})
	pod = s.waitPod(t, "noexec", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if st := ctrStatus(pod, "main"); st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 128 ||
		st.State.Terminated.Reason != "StartError" || !strings.Contains(st.State.Terminated.Message, "no-such-program") {
		t.Errorf("status of a missing program: %+v", st)
	}
}

// restartPolicy Always restarts with a restart count; a Deployment becomes available.
func (s *nodeAgentSuite) testRestarts(t *testing.T) {
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{busybox("main", "echo run; sleep 0.5; exit 1")}},
	})
	pod := s.waitPod(t, "crash", "restarted", func(p *corev1.Pod) bool {
		st := ctrStatus(p, "main")
		return st != nil && st.RestartCount >= 1 && st.LastTerminationState.Terminated != nil
	})
	st := ctrStatus(pod, "main")
	if st.LastTerminationState.Terminated.ExitCode != 1 || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, last state %+v", pod.Status.Phase, st.LastTerminationState)
	}
	pod = s.waitPod(t, "crash", "in back-off", func(p *corev1.Pod) bool {
		st := ctrStatus(p, "main")
		return st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff"
	})
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("crash-looping pod is %s", pod.Status.Phase)
	}

	one := int32(1)
	labels := map[string]string{"app": "sleeper"}
	_, err := s.env.Kube.AppsV1().Deployments(s.ns).Create(s.ctx(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"d8v.test/agents": s.run},
					Containers:   []corev1.Container{busybox("main", "exec sleep 100000")},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		d, err := s.env.Kube.AppsV1().Deployments(s.ns).Get(s.ctx(), "sleeper", metav1.GetOptions{})
		if err == nil && d.Status.AvailableReplicas == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment not available: %+v %v\n%s", d.Status, err, s.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	pods, err := s.env.Kube.CoreV1().Pods(s.ns).List(s.ctx(), metav1.ListOptions{LabelSelector: "app=sleeper"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("deployment pods: %v", err)
	}
	s.uids[pods.Items[0].UID] = true
}

// Deletion: SIGTERM to every container, SIGKILL after the grace period, terminal status, cleanup,
// and only then the Pod goes away.
func (s *nodeAgentSuite) testDeletion(t *testing.T) {
	out := filepath.Join(s.out, "stop")
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	grace := int64(4)
	// Each container is ready once its trap is set, so that the test deletes the pod only then.
	trapped := &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "test", "-f", "/tmp/trapped"}}}}
	polite := busybox("polite", `trap 'echo got TERM > /out/polite; exit 0' TERM; touch /tmp/trapped; while true; do sleep 0.2; done`)
	polite.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	polite.ReadinessProbe = trapped
	stubborn := busybox("stubborn", `trap '' TERM; touch /tmp/trapped; while true; do sleep 0.2; done`)
	stubborn.ReadinessProbe = trapped
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stopper"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{polite, stubborn},
			Volumes: []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: out, Type: &dirOrCreate}}}},
		},
	})
	pod := s.waitPod(t, "stopper", "Running", func(p *corev1.Pod) bool { return isReady(p) })
	procs := []nodeagent.RunningInfo{s.running(t, pod, "polite"), s.running(t, pod, "stubborn")}
	podDir := nodeagent.Layout{Root: s.agentOf(pod).root}.PodDir(pod.UID)

	ctx := s.ctx()
	w, err := s.env.Kube.CoreV1().Pods(s.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "stopper").String(), ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := s.env.Kube.CoreV1().Pods(s.ns).Delete(ctx, "stopper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	last := pod
	timeout := time.After(60 * time.Second)
	gone := false
	for !gone {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				if ev.Type == watch.Deleted {
					gone = true
				} else {
					last = p
				}
			}
		case <-timeout:
			t.Fatalf("pod not deleted after 60s: %+v\n%s", last.Status, s.logs())
		}
	}
	took := time.Since(start)
	if took < time.Duration(grace)*time.Second || took > time.Duration(grace)*time.Second+15*time.Second {
		t.Errorf("deletion took %s with a %ds grace period and a container that ignores SIGTERM", took, grace)
	}
	for name, code := range map[string]int32{"polite": 0, "stubborn": 137} {
		st := ctrStatus(last, name)
		if st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != code {
			t.Errorf("last status of %s before deletion: %+v, want exit %d", name, st, code)
		}
	}
	if last.Status.Phase != corev1.PodFailed {
		t.Errorf("last phase %s, want Failed (a container was killed)", last.Status.Phase)
	}
	if b, err := os.ReadFile(filepath.Join(out, "polite")); err != nil || strings.TrimSpace(string(b)) != "got TERM" {
		t.Errorf("the polite container did not see SIGTERM: %q %v", b, err)
	}
	for _, ri := range procs {
		if procAlive(ri.Pid, ri.StartTicks) || procAlive(ri.ShimPid, ri.ShimStartTicks) {
			t.Errorf("process %d (shim %d) outlived its pod", ri.Pid, ri.ShimPid)
		}
	}
	if netnsExists(pod.UID) {
		t.Error("the pod's network namespace outlived it")
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod directory %s outlived the pod: %v", podDir, err)
	}
}

// The Ready condition waits for the readiness gate, which another controller writes; the agent
// never drops that condition when it writes status.
func (s *nodeAgentSuite) testReadinessGate(t *testing.T) {
	gate := corev1.PodConditionType("d8v.test/gate")
	out := filepath.Join(s.out, "gate")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	c := busybox("main", "until [ -f /out/go ]; do sleep 0.2; done; touch /tmp/ready; exec sleep 100000")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "test", "-f", "/tmp/ready"}}}}
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: corev1.PodSpec{
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
			Containers:     []corev1.Container{c},
			Volumes:        []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}}},
		},
	})
	pod := s.waitPod(t, "gated", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	s.running(t, pod, "main")
	setGate := func(status corev1.ConditionStatus) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: gate, Status: status, LastTransitionTime: metav1.Now(), Reason: "Test"}}}})
		if _, err := s.env.Kube.CoreV1().Pods(s.ns).Patch(s.ctx(), "gated", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	gateIs := func(p *corev1.Pod, want corev1.ConditionStatus) bool {
		c := podCond(p, gate)
		return c != nil && c.Status == want
	}
	readyIs := func(p *corev1.Pod, status corev1.ConditionStatus, reason string) bool {
		c := podCond(p, corev1.PodReady)
		return c != nil && c.Status == status && c.Reason == reason
	}
	// The container is not ready yet, so neither is the pod, gate or no gate.
	s.waitPod(t, "gated", "unready", func(p *corev1.Pod) bool { return readyIs(p, corev1.ConditionFalse, "ContainersNotReady") })
	setGate(corev1.ConditionTrue)
	// Now the container turns ready: the agent writes ContainersReady and Ready and must keep the gate.
	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pod = s.waitPod(t, "gated", "Ready", func(p *corev1.Pod) bool { return isReady(p) })
	if !gateIs(pod, corev1.ConditionTrue) {
		t.Fatalf("the agent dropped the readiness gate condition: %+v", pod.Status.Conditions)
	}
	setGate(corev1.ConditionFalse)
	pod = s.waitPod(t, "gated", "held back by its gate", func(p *corev1.Pod) bool {
		return readyIs(p, corev1.ConditionFalse, "ReadinessGatesNotReady")
	})
	if c := podCond(pod, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionTrue || !gateIs(pod, corev1.ConditionFalse) {
		t.Errorf("conditions %+v", pod.Status.Conditions)
	}
	setGate(corev1.ConditionTrue)
	s.waitPod(t, "gated", "Ready again", func(p *corev1.Pod) bool { return isReady(p) && gateIs(p, corev1.ConditionTrue) })
	// Still there after a while of status writes.
	time.Sleep(2 * time.Second)
	s.waitPod(t, "gated", "still Ready with its gate", func(p *corev1.Pod) bool { return isReady(p) && gateIs(p, corev1.ConditionTrue) })
}

// Stopping the agent leaves pods running; a new agent adopts them. Pods whose processes vanished
// while no agent ran are reported Failed, and pods deleted meanwhile are cleaned up.
func (s *nodeAgentSuite) testAgentRestart(t *testing.T) {
	a := s.agents[0]
	pin := map[string]string{"kubernetes.io/hostname": a.name}
	for _, name := range []string{"survivor", "victim", "orphan"} {
		s.create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeSelector: pin, Containers: []corev1.Container{busybox("main", "exec sleep 100000")}},
		})
	}
	pods := map[string]*corev1.Pod{}
	procs := map[string]nodeagent.RunningInfo{}
	for _, name := range []string{"survivor", "victim", "orphan"} {
		pods[name] = s.waitPod(t, name, "Ready", isReady)
		procs[name] = s.running(t, pods[name], "main")
	}

	a.stop()
	for name, ri := range procs {
		if !procAlive(ri.Pid, ri.StartTicks) {
			t.Fatalf("stopping the agent killed %s's container", name)
		}
	}
	// While no agent runs: the victim's processes die without a trace, the orphan leaves the API.
	v := procs["victim"]
	_ = syscall.Kill(v.ShimPid, syscall.SIGKILL)
	_ = syscall.Kill(-v.Pid, syscall.SIGKILL)
	zero := int64(0)
	if err := s.env.Kube.CoreV1().Pods(s.ns).Delete(s.ctx(), "orphan", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	a.start()

	pod := s.waitPod(t, "victim", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if !strings.Contains(pod.Status.Message, "gone") {
		t.Errorf("lost pod's message %q", pod.Status.Message)
	}
	if st := ctrStatus(pod, "main"); st == nil || st.State.Terminated == nil || st.State.Terminated.Reason != "ContainerStatusUnknown" {
		t.Errorf("lost container status %+v", st)
	}
	survivor := s.waitPod(t, "survivor", "Ready after the restart", isReady)
	if st := ctrStatus(survivor, "main"); st.RestartCount != 0 || st.State.Running == nil ||
		!st.State.Running.StartedAt.Equal(&ctrStatus(pods["survivor"], "main").State.Running.StartedAt) {
		t.Errorf("survivor was restarted: %+v", st)
	}
	if ri := procs["survivor"]; !procAlive(ri.Pid, ri.StartTicks) {
		t.Error("survivor's process died across the agent restart")
	}
	orphan := pods["orphan"]
	l := nodeagent.Layout{Root: a.root}
	deadline := time.Now().Add(60 * time.Second)
	for procAlive(procs["orphan"].Pid, procs["orphan"].StartTicks) || netnsExists(orphan.UID) || exists(l.PodDir(orphan.UID)) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphan (deleted while the agent was down) was not cleaned up\n%s", s.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Deleting every pod leaves no process, network namespace or pod directory behind.
func (s *nodeAgentSuite) testCleanup(t *testing.T) {
	ctx := s.ctx()
	fg := metav1.DeletePropagationForeground
	if err := s.env.Kube.AppsV1().Deployments(s.ns).Delete(ctx, "sleeper", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := s.env.Kube.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pods, err := s.env.Kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, p := range pods.Items {
				names = append(names, p.Name+"("+string(p.Status.Phase)+")")
			}
			t.Fatalf("pods left: %v %v\n%s", names, err, s.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Let the agents finish the cleanup of pods whose API objects went first (terminal ones).
	start := time.Now()
	deadline = start.Add(30 * time.Second)
	for l := s.leftovers(); l != "" && time.Now().Before(deadline); l = s.leftovers() {
		if time.Since(start) > 5*time.Second {
			t.Logf("still left after %s:\n%s", time.Since(start).Round(time.Second), l)
		}
		time.Sleep(time.Second)
	}
	if l := s.leftovers(); l != "" {
		t.Errorf("left behind after every pod was deleted:\n%s\n%s", l, s.logs())
	}
}
