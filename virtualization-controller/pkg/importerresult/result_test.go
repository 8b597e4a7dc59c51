package importerresult

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

func TestDoneAndOf(t *testing.T) {
	ended := func(exit int32, msg string) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: Container,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error", Message: msg}}}}}
	}
	cases := []struct {
		name   string
		status corev1.PodStatus
		done   bool
		reason contract.Reason
		msg    string
	}{
		{"running", corev1.PodStatus{Phase: corev1.PodRunning}, false, "", ""},
		{"completed", ended(0, string(contract.Result{Reason: contract.ReasonCompleted, Format: "qcow2"}.Marshal())), true, contract.ReasonCompleted, ""},
		{"checksum", ended(20, string(contract.Result{Reason: contract.ReasonChecksumMismatch, Message: "differs"}.Marshal())), true, contract.ReasonChecksumMismatch, "differs"},
		{"no result", ended(137, ""), true, contract.ReasonInternal, "exited with code 137 (Error) without a result"},
		{"pod failed before the container", corev1.PodStatus{Phase: corev1.PodFailed, Message: "evicted"}, true, contract.ReasonInternal, "without its container terminating: evicted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: tc.status}
			if Done(pod) != tc.done {
				t.Fatalf("Done = %v", !tc.done)
			}
			if !tc.done {
				return
			}
			r := Of(pod)
			if r.Reason != tc.reason || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("Of = %+v", r)
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(created, finished time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: Container,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(finished)}}}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want float64
	}{
		{"ended", pod(start, start.Add(90*time.Second)), 90},
		{"times not known", pod(time.Time{}, time.Time{}), 0},
		{"container not terminated", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, 0},
	} {
		if got := Seconds(tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
