package migration

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Failure reasons of migrations after the hand-off, when the handlers give none.
const (
	ReasonMigrationFailed = "Migration failed"
	ReasonHandOffLost     = "Migration failed because the VMI's migration state no longer names it"
	ReasonTargetOnSource  = "Migration failed because the target pod was placed on the source node"
)

// VMIUpdate is what the controller writes into the migrated VMI: its status.migrationState and
// its kubevirt.io/migrationTargetNodeName label, the target's virt-handler watching VMIs by it.
type VMIUpdate struct {
	MigrationState *kubevirtv1.VirtualMachineInstanceMigrationState
	// TargetNodeLabel is the label's value; empty removes the label.
	TargetNodeLabel string
}

// Apply writes the update into v.
func (u *VMIUpdate) Apply(v *kubevirtv1.VirtualMachineInstance) {
	v.Status.MigrationState = u.MigrationState.DeepCopy()
	if u.TargetNodeLabel == "" {
		delete(v.Labels, kubevirtv1.MigrationTargetNodeNameLabel)
		return
	}
	if v.Labels == nil {
		v.Labels = map[string]string{}
	}
	v.Labels[kubevirtv1.MigrationTargetNodeNameLabel] = u.TargetNodeLabel
}

// ours is the VMI's migration state when it belongs to m.
func ours(m *kubevirtv1.VirtualMachineInstanceMigration, v *kubevirtv1.VirtualMachineInstance) *kubevirtv1.VirtualMachineInstanceMigrationState {
	if v == nil || v.Status.MigrationState == nil || v.Status.MigrationState.MigrationUID != m.UID {
		return nil
	}
	return v.Status.MigrationState
}

// movedToTarget reports whether m moved the guest: the target's handler took the VMI over.
func movedToTarget(m *kubevirtv1.VirtualMachineInstanceMigration, v *kubevirtv1.VirtualMachineInstance) bool {
	ms := ours(m, v)
	return ms != nil && ms.Completed && ms.TargetNode != "" && v.Status.NodeName == ms.TargetNode
}

// sourcePods are the migration's source Pod among the VMI's Pods, by the name recorded when
// the target Pod was made.
func sourcePods(m *kubevirtv1.VirtualMachineInstanceMigration, pods []corev1.Pod) []corev1.Pod {
	st := m.Status.MigrationState
	if st == nil || st.SourcePod == "" {
		return nil
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.Name == st.SourcePod && p.Labels[kubevirtv1.MigrationJobLabel] != string(m.UID) {
			out = append(out, p)
		}
	}
	return out
}

// mirror is the migration's copy of the VMI's migration state, as KubeVirt keeps it in the
// migration's status; a failure reason the controller found stays when the handlers give none.
func mirror(ms, prev *kubevirtv1.VirtualMachineInstanceMigrationState) *kubevirtv1.VirtualMachineInstanceMigrationState {
	out := ms.DeepCopy()
	if out.FailureReason == "" && prev != nil {
		out.FailureReason = prev.FailureReason
	}
	return out
}

// handOff gives the migration to the handlers: the VMI's migration state names source and
// target, and the label brings the VMI into the target handler's view. Handed over already (the
// status write after the VMI's failed), it only moves the phase on.
func handOff(in Input, target *corev1.Pod, d Decision, fail func(Decision, string) Decision) Decision {
	m, v := in.Migration, in.VMI
	if target.Spec.NodeName == v.Status.NodeName {
		return fail(d, ReasonTargetOnSource)
	}
	state := ours(m, v).DeepCopy()
	if state == nil {
		state = &kubevirtv1.VirtualMachineInstanceMigrationState{
			MigrationUID: m.UID,
			SourceNode:   v.Status.NodeName,
			TargetNode:   target.Spec.NodeName,
			TargetPod:    target.Name,
		}
		if prev := d.Status.MigrationState; prev != nil {
			state.SourcePod = prev.SourcePod
		}
		d.VMI = &VMIUpdate{MigrationState: state, TargetNodeLabel: target.Spec.NodeName}
	}
	d.Status.MigrationState = mirror(state, d.Status.MigrationState)
	d.Status.Phase = kubevirtv1.MigrationPreparingTarget
	d.Message = "handed over to the handlers of " + state.SourceNode + " and " + state.TargetNode
	return d.stamp(m, in.Now)
}

// handedOffRank orders the phases after the hand-off; they only ever move forward.
var handedOffRank = map[kubevirtv1.VirtualMachineInstanceMigrationPhase]int{
	kubevirtv1.MigrationPreparingTarget: 1,
	kubevirtv1.MigrationTargetReady:     2,
	kubevirtv1.MigrationRunning:         3,
}

// follow moves a handed-off migration along what the handlers wrote into the VMI: the target's
// address (TargetReady), the start of the job (Running), the guest on the target (Succeeded) or a
// failure.
func follow(in Input, d Decision, fail func(Decision, string) Decision) Decision {
	m, v := in.Migration, in.VMI
	ms := ours(m, v)
	if ms == nil {
		return fail(d, ReasonHandOffLost)
	}
	d.Status.MigrationState = mirror(ms, d.Status.MigrationState)
	advance := func(p kubevirtv1.VirtualMachineInstanceMigrationPhase) {
		if handedOffRank[p] > handedOffRank[d.Status.Phase] {
			d.Status.Phase = p
		}
	}
	switch {
	case movedToTarget(m, v):
		d.Status.Phase = kubevirtv1.MigrationSucceeded
		d.Finalizer = false
		d.Message = "the VMI runs on " + ms.TargetNode
		if hasLive(sourcePods(m, in.VMIPods)) {
			d.Action = DeleteSourcePod
		}
		return d.stamp(m, in.Now)
	case ms.Failed:
		reason := ms.FailureReason
		if reason == "" {
			reason = ReasonMigrationFailed
		}
		return fail(d, reason)
	case ms.StartTimestamp != nil:
		advance(kubevirtv1.MigrationRunning)
	case ms.TargetNodeAddress != "":
		advance(kubevirtv1.MigrationTargetReady)
	}
	return d.stamp(m, in.Now)
}

// failVMI ends the VMI's part of a failed migration: its state says failed, and the target
// handler's label goes. nil when there is nothing to change, or when the guest already moved.
func failVMI(m *kubevirtv1.VirtualMachineInstanceMigration, v *kubevirtv1.VirtualMachineInstance, reason string, now time.Time) *VMIUpdate {
	ms := ours(m, v)
	if ms == nil || movedToTarget(m, v) {
		return nil
	}
	_, labelled := v.Labels[kubevirtv1.MigrationTargetNodeNameLabel]
	if ms.Failed && ms.EndTimestamp != nil && !labelled {
		return nil
	}
	state := ms.DeepCopy()
	state.Failed = true
	if state.FailureReason == "" {
		state.FailureReason = reason
	}
	if state.EndTimestamp == nil {
		t := metav1.NewTime(now.Truncate(time.Second))
		state.EndTimestamp = &t
	}
	return &VMIUpdate{MigrationState: state}
}

// abortVMI asks the handlers to abort the VMI's migration.
func abortVMI(m *kubevirtv1.VirtualMachineInstanceMigration, v *kubevirtv1.VirtualMachineInstance) *VMIUpdate {
	ms := ours(m, v)
	if ms == nil || ms.AbortRequested || ms.Completed || ms.Failed {
		return nil
	}
	state := ms.DeepCopy()
	state.AbortRequested = true
	return &VMIUpdate{MigrationState: state, TargetNodeLabel: v.Labels[kubevirtv1.MigrationTargetNodeNameLabel]}
}
