package migration

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// handedVMI runs on n1 with the hand-off of migration m to n2 in its status, as the controller
// writes it, changed by mut as the handlers would.
func handedVMI(m string, mut ...func(*kubevirtv1.VirtualMachineInstanceMigrationState)) *kubevirtv1.VirtualMachineInstance {
	v := runningVMI("n1")
	v.Labels = map[string]string{kubevirtv1.MigrationTargetNodeNameLabel: "n2", kubevirtv1.NodeNameLabel: "n1"}
	v.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{
		MigrationUID: types.UID("uid-" + m), SourceNode: "n1", SourcePod: "virt-launcher-vm-src", TargetNode: "n2", TargetPod: "virt-launcher-vm-tgt",
	}
	for _, f := range mut {
		f(v.Status.MigrationState)
	}
	return v
}

var (
	ts         = metav1.NewTime(now.Add(-time.Minute))
	addressed  = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.TargetNodeAddress = "10.213.0.9" }
	jobStarted = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.StartTimestamp = ts.DeepCopy() }
	completed  = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) {
		ms.Completed, ms.EndTimestamp = true, ts.DeepCopy()
	}
	jobFailed = func(ms *kubevirtv1.VirtualMachineInstanceMigrationState) { ms.Failed, ms.FailureReason = true, "boom" }
	onTarget  = func(v *kubevirtv1.VirtualMachineInstance) {
		v.Status.NodeName, v.Labels = "n2", map[string]string{kubevirtv1.NodeNameLabel: "n2"}
	}
	computeDown = func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: launcherpod.ComputeContainer, Ready: false}}
	}
	onNode = func(n string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
)

// withSource records the source Pod in the migration's status, as startTarget does.
func withSource(m *kubevirtv1.VirtualMachineInstanceMigration) {
	m.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: m.UID, SourceNode: "n1", SourcePod: "virt-launcher-vm-src"}
}

func TestDecideAfterScheduling(t *testing.T) {
	pods := func(ps ...corev1.Pod) []corev1.Pod { return ps }
	vmiWith := func(v *kubevirtv1.VirtualMachineInstance, f func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
		f(v)
		return v
	}
	tgt := targetPod("m", ready, onNode("n2"))
	// checkVMI returns what is wrong with the VMI update; nil for none expected.
	noUpdate := func(u *VMIUpdate) error {
		if u != nil {
			return fmt.Errorf("unexpected VMI update %+v", u)
		}
		return nil
	}
	labelGone := func(u *VMIUpdate) error {
		if u == nil || u.TargetNodeLabel != "" || u.MigrationState == nil || !u.MigrationState.Failed || u.MigrationState.EndTimestamp == nil {
			return fmt.Errorf("want the failure recorded and the label gone, got %+v", u)
		}
		return nil
	}
	tests := []struct {
		name      string
		in        Input
		action    Action
		phase     kubevirtv1.VirtualMachineInstanceMigrationPhase
		reason    string
		finalizer bool
		vmi       func(*VMIUpdate) error
	}{
		{
			name:   "scheduling waits for the compute container",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationScheduling, withSource), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m", computeDown, onNode("n2")))},
			action: Nothing, phase: kubevirtv1.MigrationScheduling, finalizer: true, vmi: noUpdate,
		},
		{
			name:  "scheduled: handed over",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationScheduled, withSource), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationPreparingTarget, finalizer: true,
			vmi: func(u *VMIUpdate) error {
				if u == nil || u.TargetNodeLabel != "n2" {
					return fmt.Errorf("update %+v", u)
				}
				ms := u.MigrationState
				if ms.MigrationUID != "uid-m" || ms.SourceNode != "n1" || ms.SourcePod != "virt-launcher-vm-src" || ms.TargetNode != "n2" || ms.TargetPod != "virt-launcher-vm-tgt" {
					return fmt.Errorf("state %+v", ms)
				}
				return nil
			},
		},
		{
			name:  "scheduled, handed over already: only the phase moves",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationScheduled, withSource), VMI: handedVMI("m"), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationPreparingTarget, finalizer: true, vmi: noUpdate,
		},
		{
			name:   "target placed on the source node",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationScheduled, withSource), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m", ready, onNode("n1")))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed, reason: ReasonTargetOnSource, vmi: noUpdate,
		},
		{
			name:  "preparing",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationPreparingTarget, withSource), VMI: handedVMI("m"), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationPreparingTarget, finalizer: true, vmi: noUpdate,
		},
		{
			name:  "target address published: target ready",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationPreparingTarget, withSource), VMI: handedVMI("m", addressed), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationTargetReady, finalizer: true, vmi: noUpdate,
		},
		{
			name:  "job started: running",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationTargetReady, withSource), VMI: handedVMI("m", addressed, jobStarted), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationRunning, finalizer: true, vmi: noUpdate,
		},
		{
			name:  "a missed step is skipped",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationPreparingTarget, withSource), VMI: handedVMI("m", addressed, jobStarted), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationRunning, finalizer: true, vmi: noUpdate,
		},
		{
			name:  "completed, not taken over yet",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource), VMI: handedVMI("m", addressed, jobStarted, completed), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationRunning, finalizer: true, vmi: noUpdate,
		},
		{
			name:   "taken over: succeeded, the source pod goes",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource), VMI: vmiWith(handedVMI("m", addressed, jobStarted, completed), onTarget), VMIPods: pods(sourcePod(), tgt)},
			action: DeleteSourcePod, phase: kubevirtv1.MigrationSucceeded, vmi: noUpdate,
		},
		{
			name:   "succeeded, the source pod still there",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationSucceeded, withSource), VMI: vmiWith(handedVMI("m", completed), onTarget), VMIPods: pods(sourcePod(), tgt)},
			action: DeleteSourcePod, phase: kubevirtv1.MigrationSucceeded, vmi: noUpdate,
		},
		{
			name:  "succeeded and clean",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationSucceeded, withSource), VMI: vmiWith(handedVMI("m", completed), onTarget), VMIPods: pods(tgt)},
			phase: kubevirtv1.MigrationSucceeded, vmi: noUpdate,
		},
		{
			name:   "the handlers report a failure",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource), VMI: handedVMI("m", addressed, jobStarted, jobFailed), VMIPods: pods(sourcePod(), tgt)},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed, reason: "boom", vmi: labelGone,
		},
		{
			name:  "failed, the label still on the VMI",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationFailed, withSource), VMI: handedVMI("m", jobFailed), VMIPods: pods(sourcePod())},
			phase: kubevirtv1.MigrationFailed, vmi: labelGone,
		},
		{
			name:   "hand-off lost",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationPreparingTarget, withSource), VMI: handedVMI("other"), VMIPods: pods(sourcePod(), tgt)},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed, reason: ReasonHandOffLost, vmi: noUpdate,
		},
		{
			name:  "deleted after the hand-off: abort requested",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource, deleted), VMI: handedVMI("m", addressed, jobStarted), VMIPods: pods(sourcePod(), tgt)},
			phase: kubevirtv1.MigrationRunning, finalizer: true,
			vmi: func(u *VMIUpdate) error {
				if u == nil || !u.MigrationState.AbortRequested || u.TargetNodeLabel != "n2" {
					return fmt.Errorf("want an abort request keeping the label, got %+v", u)
				}
				return nil
			},
		},
		{
			name:   "deleted after the guest moved: succeeded anyway",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource, deleted), VMI: vmiWith(handedVMI("m", completed), onTarget), VMIPods: pods(sourcePod(), tgt)},
			action: DeleteSourcePod, phase: kubevirtv1.MigrationSucceeded, vmi: noUpdate,
		},
		{
			name:   "target pod failed after the hand-off",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource), VMI: handedVMI("m", addressed, jobStarted), VMIPods: pods(sourcePod(), targetPod("m", podFailed, onNode("n2")))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed, reason: ReasonTargetPodDown, vmi: labelGone,
		},
		{
			name:   "the target pod is the VMI's once the guest moved",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationRunning, withSource), VMI: vmiWith(handedVMI("m", completed), onTarget), VMIPods: pods(sourcePod(), targetPod("m", podFailed, onNode("n2")))},
			action: DeleteSourcePod, phase: kubevirtv1.MigrationSucceeded, vmi: noUpdate,
		},
		{
			name: "timeout annotation",
			in: Input{Migration: mig("m", kubevirtv1.MigrationScheduling, withSource, func(m *kubevirtv1.VirtualMachineInstanceMigration) {
				m.Annotations = map[string]string{kubevirtv1.MigrationUnschedulablePodTimeoutSecondsAnnotation: "5"}
			}), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m", unschedulableFor(6*time.Second)))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationScheduling, finalizer: true, vmi: noUpdate,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			d := Decide(tt.in)
			reason := ""
			if d.Status.MigrationState != nil && d.Status.Phase == kubevirtv1.MigrationFailed {
				reason = d.Status.MigrationState.FailureReason
			}
			if d.Action != tt.action || d.Status.Phase != tt.phase || reason != tt.reason || d.Finalizer != tt.finalizer {
				t.Errorf("got %v %q %q finalizer %v, want %v %q %q %v (%s)",
					d.Action, d.Status.Phase, reason, d.Finalizer, tt.action, tt.phase, tt.reason, tt.finalizer, d.Message)
			}
			if err := tt.vmi(d.VMI); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestVMIUpdateApply(t *testing.T) {
	v := handedVMI("m")
	(&VMIUpdate{MigrationState: v.Status.MigrationState}).Apply(v)
	if _, ok := v.Labels[kubevirtv1.MigrationTargetNodeNameLabel]; ok || v.Labels[kubevirtv1.NodeNameLabel] != "n1" {
		t.Errorf("labels %v", v.Labels)
	}
	v.Labels = nil
	(&VMIUpdate{MigrationState: v.Status.MigrationState, TargetNodeLabel: "n2"}).Apply(v)
	if v.Labels[kubevirtv1.MigrationTargetNodeNameLabel] != "n2" {
		t.Errorf("labels %v", v.Labels)
	}
}
