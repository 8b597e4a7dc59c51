package vm

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
)

// LaunchDurations split the last start from the phase transitions (oldest first) and the time
// the agent answered (nil while it does not): WaitingForDependencies is the time spent Pending
// before the last Starting, VirtualMachineStarting the time from that Starting to the Running
// right after it, and GuestOSAgentStarting the time from that Running to the agent's answer. A
// part that cannot be told from the transitions kept (not reached yet, or gone past the kept
// transitions) keeps its old value; a later Running (after a migration or a pause) is no start.
func LaunchDurations(old v1alpha2.VirtualMachineLaunchTimeDuration, ts []v1alpha2.VirtualMachinePhaseTransition, agentSince *metav1.Time) v1alpha2.VirtualMachineLaunchTimeDuration {
	out := old
	starting := lastIndex(ts, len(ts), v1alpha2.MachineStarting)
	if starting < 0 {
		return out
	}
	if pending := lastIndex(ts, starting, v1alpha2.MachinePending); pending >= 0 {
		out.WaitingForDependencies = between(ts[pending].Timestamp, ts[pending+1].Timestamp)
	}
	if starting+1 == len(ts) || ts[starting+1].Phase != v1alpha2.MachineRunning {
		return out
	}
	running := ts[starting+1].Timestamp
	out.VirtualMachineStarting = between(ts[starting].Timestamp, running)
	if agentSince != nil && !agentSince.Before(&running) {
		out.GuestOSAgentStarting = between(running, *agentSince)
	}
	return out
}

// lastIndex is the index of the last transition to phase before end, -1 when there is none.
func lastIndex(ts []v1alpha2.VirtualMachinePhaseTransition, end int, phase v1alpha2.MachinePhase) int {
	for i := end - 1; i >= 0; i-- {
		if ts[i].Phase == phase {
			return i
		}
	}
	return -1
}

func between(from, to metav1.Time) *metav1.Duration {
	return &metav1.Duration{Duration: to.Sub(from.Time)}
}

// agentSince is when the AgentReady condition turned True, nil while it is not.
func agentSince(conds []metav1.Condition) *metav1.Time {
	c := meta.FindStatusCondition(conds, string(vmcondition.TypeAgentReady))
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return &c.LastTransitionTime
}

// MigrationState is the state of the VMI's last live migration; old (the last one seen) while
// the VMI has none, as after a restart.
func MigrationState(old *v1alpha2.VirtualMachineMigrationState, vmi *kubevirtv1.VirtualMachineInstance) *v1alpha2.VirtualMachineMigrationState {
	if vmi == nil || vmi.Status.MigrationState == nil {
		return old
	}
	m := vmi.Status.MigrationState
	out := &v1alpha2.VirtualMachineMigrationState{
		StartTimestamp: m.StartTimestamp.DeepCopy(), EndTimestamp: m.EndTimestamp.DeepCopy(),
		Source: v1alpha2.VirtualMachineLocation{Node: m.SourceNode, Pod: m.SourcePod},
		Target: v1alpha2.VirtualMachineLocation{Node: m.TargetNode, Pod: m.TargetPod},
	}
	switch {
	case m.Failed:
		out.Result = v1alpha2.MigrationResultFailed
	case m.Completed:
		out.Result = v1alpha2.MigrationResultSucceeded
	}
	return out
}
