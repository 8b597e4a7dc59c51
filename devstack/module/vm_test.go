package module

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestVMRunning(t *testing.T) {
	vm := func(status string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"printableStatus": status}}}
		u.SetName("demo")
		return u
	}
	vmi := func(uid, phase string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"phase": phase}}}
		u.SetUID(types.UID(uid))
		return u
	}
	pod := func(vmiUID string, phase corev1.PodPhase, ready corev1.ConditionStatus, reason string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-demo-" + vmiUID, Labels: map[string]string{createdByLabel: vmiUID}},
			Status: corev1.PodStatus{Phase: phase, Reason: reason,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	running := pod("new", corev1.PodRunning, corev1.ConditionTrue, "")
	shutDown := pod("old", corev1.PodFailed, corev1.ConditionFalse, "Terminated")
	for _, tc := range []struct {
		name string
		vm   *unstructured.Unstructured
		vmi  *unstructured.Unstructured
		pods []corev1.Pod
		ok   bool
		why  string
	}{
		{"runs", vm("Running"), vmi("new", "Running"), []corev1.Pod{shutDown, running}, true, "running"},
		{"one of two launcher pods runs (a migration's target)", vm("Running"), vmi("new", "Running"),
			[]corev1.Pod{pod("new", corev1.PodPending, corev1.ConditionFalse, ""), running}, true, "running"},
		{"stale status after a stack restart", vm("Running"), vmi("old", "Running"), []corev1.Pod{shutDown}, false, "launcher pod virt-launcher-demo-old is Failed Terminated"},
		{"launcher not ready yet", vm("Running"), vmi("new", "Running"), []corev1.Pod{pod("new", corev1.PodRunning, corev1.ConditionFalse, "")}, false, "is Running, not Ready"},
		{"no launcher pod", vm("Running"), vmi("new", "Running"), []corev1.Pod{shutDown}, false, "has no launcher pod"},
		{"VMI not running", vm("Running"), vmi("new", "Scheduled"), []corev1.Pod{running}, false, "VMI is Scheduled"},
		{"no VMI", vm("Running"), nil, nil, false, "no VMI yet"},
		{"VM starting", vm("Starting"), vmi("new", "Running"), []corev1.Pod{running}, false, `VM demo is "Starting"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := vmRunning(tc.vm, tc.vmi, tc.pods)
			if ok != tc.ok || !strings.Contains(why, tc.why) {
				t.Errorf("vmRunning = %v, %q; want %v, %q", ok, why, tc.ok, tc.why)
			}
		})
	}
}
