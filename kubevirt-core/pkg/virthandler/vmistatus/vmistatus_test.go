package vmistatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/vmicond"
)

func testVMI(phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Status.Phase = phase
	vmi.Spec.Networks = []kubevirtv1.Network{
		{Name: "extra", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "x"}}},
		{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
	}
	vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "extra"}, {Name: "default"}}
	return vmi
}

func testPod(phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{}
	p.Status.Phase = phase
	p.Status.PodIP = "10.213.0.7"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.213.0.7"}}
	return p
}

func dom(state launcherapi.DomainState) *launcherapi.DomainStatus {
	return &launcherapi.DomainStatus{Defined: true, State: state, Interfaces: []launcherapi.Interface{
		{Name: "default", MAC: "52:54:00:00:00:01"}, {Name: "extra", MAC: "52:54:00:00:00:02", IPs: []string{"192.168.1.5"}},
	}}
}

func ended(code int, reason string) *launcherapi.DomainStatus {
	return &launcherapi.DomainStatus{Defined: true, State: launcherapi.StateShutoff, Result: &launcherapi.Result{Reason: reason, ExitCode: code}}
}

// exited is a launcher Pod whose compute container ended with code and termination message msg.
func exited(phase corev1.PodPhase, code int32, msg string) *corev1.Pod {
	p := testPod(phase)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "compute", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg},
	}}}
	return p
}

func cond(st kubevirtv1.VirtualMachineInstanceStatus, t kubevirtv1.VirtualMachineInstanceConditionType) string {
	if c := vmicond.Get(st.Conditions, t); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

func TestCompute(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		phase  kubevirtv1.VirtualMachineInstancePhase
		pod    *corev1.Pod
		dom    *launcherapi.DomainStatus
		want   kubevirtv1.VirtualMachineInstancePhase
		ready  string
		paused string
	}{
		{name: "launcher not reached yet", phase: kubevirtv1.Scheduled, pod: testPod(corev1.PodRunning), want: kubevirtv1.Scheduled},
		{name: "domain defined but not started", phase: kubevirtv1.Scheduled, pod: testPod(corev1.PodRunning), dom: &launcherapi.DomainStatus{Defined: true, State: launcherapi.StateShutoff}, want: kubevirtv1.Scheduled},
		{name: "domain running", phase: kubevirtv1.Scheduled, pod: testPod(corev1.PodRunning), dom: dom(launcherapi.StateRunning), want: kubevirtv1.Running, ready: "True/"},
		{name: "paused", phase: kubevirtv1.Running, pod: testPod(corev1.PodRunning), dom: dom(launcherapi.StatePaused), want: kubevirtv1.Running, ready: "False/Paused", paused: "True/PausedByUser"},
		{name: "poweroff from inside", phase: kubevirtv1.Running, pod: testPod(corev1.PodRunning), dom: ended(0, "Shutdown"), want: kubevirtv1.Succeeded, ready: "False/GuestNotRunning"},
		{name: "crash", phase: kubevirtv1.Running, pod: testPod(corev1.PodRunning), dom: ended(2, "Crashed"), want: kubevirtv1.Failed, ready: "False/GuestNotRunning"},
		{name: "pod failed without a report", phase: kubevirtv1.Running, pod: testPod(corev1.PodFailed), want: kubevirtv1.Failed, ready: "False/LauncherGone"},
		{name: "pod gone without a report", phase: kubevirtv1.Running, want: kubevirtv1.Failed, ready: "False/LauncherGone"},
		{name: "report lost, launcher exited 0", phase: kubevirtv1.Running, pod: exited(corev1.PodSucceeded, 0, `{"reason":"Shutdown","exitCode":0}`), want: kubevirtv1.Succeeded, ready: "False/GuestNotRunning"},
		{name: "report lost, launcher exited 2", phase: kubevirtv1.Running, pod: exited(corev1.PodFailed, 2, `{"reason":"Crashed","exitCode":2}`), want: kubevirtv1.Failed, ready: "False/GuestNotRunning"},
		{name: "exit code decides over the message", phase: kubevirtv1.Running, pod: exited(corev1.PodFailed, 1, `{"reason":"Shutdown","exitCode":0}`), want: kubevirtv1.Failed, ready: "False/GuestNotRunning"},
		{name: "launcher killed before writing a message", phase: kubevirtv1.Running, pod: exited(corev1.PodFailed, 137, ""), want: kubevirtv1.Failed, ready: "False/GuestNotRunning"},
		{name: "report wins over the pod's end", phase: kubevirtv1.Running, pod: testPod(corev1.PodSucceeded), dom: ended(0, "Destroyed"), want: kubevirtv1.Succeeded, ready: "False/GuestNotRunning"},
		{name: "final phase never changes", phase: kubevirtv1.Failed, pod: testPod(corev1.PodRunning), dom: dom(launcherapi.StateRunning), want: kubevirtv1.Failed},
		{name: "controller's phase is left alone", phase: kubevirtv1.Scheduling, pod: testPod(corev1.PodPending), dom: dom(launcherapi.StateRunning), want: kubevirtv1.Scheduling},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Compute(testVMI(c.phase), c.pod, c.dom, now)
			if st.Phase != c.want {
				t.Errorf("phase = %s, want %s", st.Phase, c.want)
			}
			if got := cond(st, kubevirtv1.VirtualMachineInstanceReady); got != c.ready {
				t.Errorf("Ready = %q, want %q", got, c.ready)
			}
			if got := cond(st, kubevirtv1.VirtualMachineInstancePaused); got != c.paused {
				t.Errorf("Paused = %q, want %q", got, c.paused)
			}
		})
	}
}

func TestInterfacesPodNetworkFirstWithPodIP(t *testing.T) {
	st := Compute(testVMI(kubevirtv1.Scheduled), testPod(corev1.PodRunning), dom(launcherapi.StateRunning), time.Now())
	if len(st.Interfaces) != 2 {
		t.Fatalf("interfaces = %+v", st.Interfaces)
	}
	first, second := st.Interfaces[0], st.Interfaces[1]
	if first.Name != "default" || first.IP != "10.213.0.7" || first.MAC != "52:54:00:00:00:01" || first.PodInterfaceName != "eth0" {
		t.Errorf("pod interface = %+v", first)
	}
	if second.Name != "extra" || second.IP != "192.168.1.5" {
		t.Errorf("second interface = %+v", second)
	}
}

func TestReadyKeepsTransitionTime(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	vmi := testVMI(kubevirtv1.Scheduled)
	vmi.Status = Compute(vmi, testPod(corev1.PodRunning), dom(launcherapi.StateRunning), t0)
	again := Compute(vmi, testPod(corev1.PodRunning), dom(launcherapi.StateRunning), t0.Add(time.Minute))
	if c := vmicond.Get(again.Conditions, kubevirtv1.VirtualMachineInstanceReady); !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("transition time moved to %v", c.LastTransitionTime)
	}
}

// TestComputeFromLauncherExit: without the launcher's report the VMI tells what its termination
// message said, or how the container ended when there is none.
func TestComputeFromLauncherExit(t *testing.T) {
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{exited(corev1.PodSucceeded, 0, `{"reason":"Shutdown","message":"the guest powered off","exitCode":0}`), "guest Shutdown: the guest powered off"},
		{exited(corev1.PodFailed, 137, ""), "guest Error"},
		{exited(corev1.PodFailed, 1, "panic: something"), "guest Error: panic: something"},
	} {
		st := Compute(testVMI(kubevirtv1.Running), c.pod, nil, time.Now())
		if got := vmicond.Get(st.Conditions, kubevirtv1.VirtualMachineInstanceReady); got == nil || got.Message != c.want {
			t.Errorf("Ready %+v, want message %q", got, c.want)
		}
	}
}
