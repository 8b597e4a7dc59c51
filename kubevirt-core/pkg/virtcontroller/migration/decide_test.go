package migration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vmi"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func mig(name string, phase kubevirtv1.VirtualMachineInstanceMigrationPhase, mut ...func(*kubevirtv1.VirtualMachineInstanceMigration)) *kubevirtv1.VirtualMachineInstanceMigration {
	m := &kubevirtv1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: "vm"},
	}
	m.Status.Phase = phase
	for _, f := range mut {
		f(m)
	}
	return m
}

func runningVMI(node string) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vmi-uid"}}
	v.Status.Phase = kubevirtv1.Running
	v.Status.NodeName = node
	return v
}

func vmiIn(phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	v := runningVMI("n1")
	v.Status.Phase = phase
	return v
}

func sourcePod() corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm-src", Labels: map[string]string{kubevirtv1.AppLabel: "virt-launcher"}}}
	p.Status.Phase = corev1.PodRunning
	return p
}

func targetPod(m string, mut ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "virt-launcher-vm-tgt", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		Labels: map[string]string{kubevirtv1.AppLabel: "virt-launcher", kubevirtv1.MigrationJobLabel: "uid-" + m},
	}}
	p.Status.Phase = corev1.PodPending
	for _, f := range mut {
		f(&p)
	}
	return p
}

var (
	deleted = func(m *kubevirtv1.VirtualMachineInstanceMigration) {
		t := metav1.NewTime(now)
		m.DeletionTimestamp = &t
	}
	ready = func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	unschedulableFor = func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.CreationTimestamp = metav1.NewTime(now.Add(-d))
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}
	}
	podFailed = func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
)

// others builds running migrations of other VMIs whose source is node.
func others(n int, node string) []kubevirtv1.VirtualMachineInstanceMigration {
	var out []kubevirtv1.VirtualMachineInstanceMigration
	for i := range n {
		o := mig("other"+string(rune('a'+i)), kubevirtv1.MigrationScheduling)
		o.Spec.VMIName = "other" + string(rune('a'+i))
		o.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{SourceNode: node}
		out = append(out, *o)
	}
	return out
}

func TestDecide(t *testing.T) {
	pods := func(ps ...corev1.Pod) []corev1.Pod { return ps }
	tests := []struct {
		name      string
		in        Input
		action    Action
		phase     kubevirtv1.VirtualMachineInstanceMigrationPhase
		reason    string
		finalizer bool
		recheck   bool
	}{
		{name: "accepted", in: Input{Migration: mig("m", ""), VMI: runningVMI("n1")}, phase: kubevirtv1.MigrationPending, finalizer: true},
		{name: "VMI missing", in: Input{Migration: mig("m", "")}, phase: kubevirtv1.MigrationFailed, reason: ReasonVMIMissing},
		{name: "VMI finished", in: Input{Migration: mig("m", ""), VMI: vmiIn(kubevirtv1.Succeeded)}, phase: kubevirtv1.MigrationFailed, reason: ReasonVMIShutdown},
		{name: "VMI stops while pending", in: Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: vmiIn(kubevirtv1.Failed)}, phase: kubevirtv1.MigrationFailed, reason: ReasonVMIShutdown},
		{name: "pending waits for the VMI to run", in: Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: vmiIn(kubevirtv1.Scheduling)}, phase: kubevirtv1.MigrationPending, finalizer: true},
		{
			name:   "pending starts the target pod",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod())},
			action: CreateTargetPod, phase: kubevirtv1.MigrationScheduling, finalizer: true,
		},
		{
			name:  "a second pod of the VMI holds it back",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("first"))},
			phase: kubevirtv1.MigrationPending, finalizer: true, recheck: true,
		},
		{
			name: "another migration of the VMI holds it back",
			in: Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod()),
				Migrations: []kubevirtv1.VirtualMachineInstanceMigration{*mig("first", kubevirtv1.MigrationScheduling)}},
			phase: kubevirtv1.MigrationPending, finalizer: true, recheck: true,
		},
		{
			name: "cluster limit",
			in: Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod()),
				Migrations: others(5, "elsewhere")},
			phase: kubevirtv1.MigrationPending, finalizer: true, recheck: true,
		},
		{
			name: "outbound limit of the source node",
			in: Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod()),
				Migrations: others(2, "n1")},
			phase: kubevirtv1.MigrationPending, finalizer: true, recheck: true,
		},
		{
			name: "other nodes' migrations leave room",
			in: Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod()),
				Migrations: append(others(1, "n1"), others(3, "n2")[1:]...)},
			action: CreateTargetPod, phase: kubevirtv1.MigrationScheduling, finalizer: true,
		},
		{
			name: "VMI handed to another migration",
			in: Input{Migration: mig("m", ""), VMI: func() *kubevirtv1.VirtualMachineInstance {
				v := runningVMI("n1")
				v.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: "uid-first"}
				return v
			}(), Migrations: []kubevirtv1.VirtualMachineInstanceMigration{*mig("first", kubevirtv1.MigrationRunning)}},
			phase: kubevirtv1.MigrationFailed, reason: ReasonAnotherMigration,
		},
		{
			name:  "pod seen: scheduling",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m"))},
			phase: kubevirtv1.MigrationScheduling, finalizer: true,
		},
		{
			name:  "scheduling waits for the pod",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationScheduling), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m"))},
			phase: kubevirtv1.MigrationScheduling, finalizer: true, recheck: true,
		},
		{
			name:  "ready pod: scheduled",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationScheduling), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m", ready))},
			phase: kubevirtv1.MigrationScheduled, finalizer: true,
		},
		{
			name:   "unschedulable too long",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationScheduling), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m", unschedulableFor(6*time.Minute)))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationScheduling, finalizer: true,
		},
		{
			name:  "target pod removed",
			in:    Input{Migration: mig("m", kubevirtv1.MigrationScheduling), VMI: runningVMI("n1"), VMIPods: pods(sourcePod())},
			phase: kubevirtv1.MigrationFailed, reason: ReasonTargetPodRemoved,
		},
		{
			name:   "target pod failed",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationScheduling), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m", podFailed))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed, reason: ReasonTargetPodDown,
		},
		{
			name:   "deleted before the hand-off: aborted",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationScheduling, deleted), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m"))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed, reason: ReasonCanceled,
		},
		{
			name:   "failed migration cleans its pod",
			in:     Input{Migration: mig("m", kubevirtv1.MigrationFailed), VMI: runningVMI("n1"), VMIPods: pods(sourcePod(), targetPod("m"))},
			action: DeleteTargetPods, phase: kubevirtv1.MigrationFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			d := Decide(tt.in)
			reason := ""
			if d.Status.MigrationState != nil {
				reason = d.Status.MigrationState.FailureReason
			}
			if d.Action != tt.action || d.Status.Phase != tt.phase || reason != tt.reason || d.Finalizer != tt.finalizer || (d.Recheck > 0) != tt.recheck {
				t.Errorf("got %v %q %q finalizer %v recheck %v, want %v %q %q %v %v",
					d.Action, d.Status.Phase, reason, d.Finalizer, d.Recheck, tt.action, tt.phase, tt.reason, tt.finalizer, tt.recheck)
			}
		})
	}
}

func TestDecideRecordsTransitionsAndSource(t *testing.T) {
	d := Decide(Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1"), VMIPods: []corev1.Pod{sourcePod()}, Now: now})
	ts := d.Status.PhaseTransitionTimestamps
	if len(ts) != 1 || ts[0].Phase != kubevirtv1.MigrationScheduling || !ts[0].PhaseTransitionTimestamp.Equal(&metav1.Time{Time: now}) {
		t.Errorf("transitions %+v", ts)
	}
	if st := d.Status.MigrationState; st == nil || st.SourceNode != "n1" || st.SourcePod != "virt-launcher-vm-src" || st.MigrationUID != "uid-m" {
		t.Errorf("migration state %+v", st)
	}
	aborted := Decide(Input{Migration: mig("m", kubevirtv1.MigrationPending, deleted), VMI: runningVMI("n1"), Now: now})
	if c := aborted.Status.Conditions; len(c) != 1 || c[0].Type != kubevirtv1.VirtualMachineInstanceMigrationAbortRequested || c[0].Status != corev1.ConditionTrue {
		t.Errorf("abort conditions %+v", c)
	}
}

func TestNewTargetPod(t *testing.T) {
	v := runningVMI("n1")
	v.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	p := NewTargetPod(v, mig("m", kubevirtv1.MigrationPending), vmi.LauncherConfig{Image: "img"})
	if p.Labels[kubevirtv1.MigrationJobLabel] != "uid-m" || p.Annotations[kubevirtv1.MigrationJobNameAnnotation] != "m" ||
		p.Labels[kubevirtv1.CreatedByLabel] != "vmi-uid" || p.GenerateName != "virt-launcher-vm-" || p.Labels[NetworkPriorityLabel] != PriorityTarget {
		t.Errorf("meta %+v", p.ObjectMeta)
	}
	terms := p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(terms) != 1 || terms[0].TopologyKey != corev1.LabelHostname || terms[0].LabelSelector.MatchLabels[kubevirtv1.CreatedByLabel] != "vmi-uid" ||
		p.Spec.Affinity.NodeAffinity == nil {
		t.Errorf("affinity %+v", p.Spec.Affinity)
	}
	if v.Spec.Affinity.PodAntiAffinity != nil {
		t.Error("the VMI's affinity was changed")
	}
}

func TestNeedsConfirmation(t *testing.T) {
	failed := Decision{Status: kubevirtv1.VirtualMachineInstanceMigrationStatus{Phase: kubevirtv1.MigrationFailed}}
	preparing := Decision{Status: kubevirtv1.VirtualMachineInstanceMigrationStatus{Phase: kubevirtv1.MigrationPreparingTarget}}
	tests := []struct {
		name string
		in   Input
		d    Decision
		want bool
	}{
		{"a target pod to start", Input{Migration: mig("m", kubevirtv1.MigrationPending), VMI: runningVMI("n1")}, Decision{Action: CreateTargetPod}, true},
		{"the VMI seems gone", Input{Migration: mig("m", kubevirtv1.MigrationScheduling)}, preparing, true},
		{"failing a handed-off migration", Input{Migration: mig("m", kubevirtv1.MigrationPreparingTarget), VMI: runningVMI("n1")}, failed, true},
		{"moving on", Input{Migration: mig("m", kubevirtv1.MigrationScheduled), VMI: runningVMI("n1")}, preparing, false},
		{"finished already", Input{Migration: mig("m", kubevirtv1.MigrationFailed)}, failed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsConfirmation(tt.in, tt.d); got != tt.want {
				t.Errorf("NeedsConfirmation = %v, want %v", got, tt.want)
			}
		})
	}
}
