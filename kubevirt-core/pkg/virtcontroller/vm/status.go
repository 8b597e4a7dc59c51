package vm

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Status computes the VM's status from its VMI, the decision of this reconcile and the clock. It
// keeps the fields other actors own (state change requests, volume requests, snapshots).
func Status(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, strategy kubevirtv1.VirtualMachineRunStrategy, d Decision, now time.Time) kubevirtv1.VirtualMachineStatus {
	st := *vm.Status.DeepCopy()
	st.Created = vmi != nil
	st.Ready = vmi != nil && vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceReady) == corev1.ConditionTrue && !deleting(vmi)
	st.RunStrategy = strategy
	st.ObservedGeneration = vm.Generation
	st.DesiredGeneration = vm.Generation
	st.StartFailure = startFailure(vm.Status.StartFailure, vmi, now)
	if d.ConsumeRequests > 0 && d.ConsumeRequests <= len(st.StateChangeRequests) {
		st.StateChangeRequests = st.StateChangeRequests[d.ConsumeRequests:]
	}
	if len(st.StateChangeRequests) == 0 {
		st.StateChangeRequests = nil
	}
	if d.VolumeRequestsApplied {
		st.VolumeRequests = nil
	}
	st.Conditions = conditions(vm, vmi, now)
	st.PrintableStatus = printable(vm, vmi, strategy, st.StartFailure, d, now)
	return st
}

// startFailure counts consecutive crashes, so that restarts back off; a VMI that reaches Running
// ends the streak.
func startFailure(prev *kubevirtv1.VirtualMachineStartFailure, vmi *kubevirtv1.VirtualMachineInstance, now time.Time) *kubevirtv1.VirtualMachineStartFailure {
	switch {
	case vmi != nil && vmi.Status.Phase == kubevirtv1.Failed:
		if prev != nil && prev.LastFailedVMIUID == vmi.UID {
			return prev
		}
		n := 1
		if prev != nil {
			n = prev.ConsecutiveFailCount + 1
		}
		retry := metav1.NewTime(now.Add(Backoff(n)).Truncate(time.Second))
		return &kubevirtv1.VirtualMachineStartFailure{ConsecutiveFailCount: n, LastFailedVMIUID: vmi.UID, RetryAfterTimestamp: &retry}
	case vmi != nil && vmi.Status.Phase == kubevirtv1.Running:
		return nil
	}
	return prev
}

// printable follows KubeVirt's precedence: the most specific state wins.
func printable(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, strategy kubevirtv1.VirtualMachineRunStrategy,
	failure *kubevirtv1.VirtualMachineStartFailure, d Decision, now time.Time) kubevirtv1.VirtualMachinePrintableStatus {
	active := vmi != nil && !finished(vmi)
	switch {
	case vm.DeletionTimestamp != nil:
		return kubevirtv1.VirtualMachineStatusTerminating
	case active && (deleting(vmi) || d.Action == Delete):
		return kubevirtv1.VirtualMachineStatusStopping
	case active && migrating(vmi, now):
		return kubevirtv1.VirtualMachineStatusMigrating
	case active && vmiCondition(vmi, kubevirtv1.VirtualMachineInstancePaused) == corev1.ConditionTrue:
		return kubevirtv1.VirtualMachineStatusPaused
	case active && vmi.Status.Phase == kubevirtv1.Running:
		return kubevirtv1.VirtualMachineStatusRunning
	case active && unschedulable(vmi):
		return kubevirtv1.VirtualMachineStatusUnschedulable
	case active:
		return kubevirtv1.VirtualMachineStatusStarting
	case failure != nil && failure.RetryAfterTimestamp != nil && now.Before(failure.RetryAfterTimestamp.Time) &&
		(strategy == kubevirtv1.RunStrategyAlways || strategy == kubevirtv1.RunStrategyRerunOnFailure):
		return kubevirtv1.VirtualMachineStatusCrashLoopBackOff
	case d.Action == Create || d.Action == Run:
		return kubevirtv1.VirtualMachineStatusStarting
	}
	return kubevirtv1.VirtualMachineStatusStopped
}

// migrating is KubeVirt's IsMigrating: the migration job started and has not ended. A handed-off
// migration still preparing its target, and one that failed, are not.
func migrating(vmi *kubevirtv1.VirtualMachineInstance, now time.Time) bool {
	ms := vmi.Status.MigrationState
	if ms == nil || ms.StartTimestamp == nil || now.Before(ms.StartTimestamp.Time) {
		return false
	}
	return ms.EndTimestamp == nil || now.Before(ms.EndTimestamp.Time)
}

func unschedulable(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceConditionType(corev1.PodScheduled) &&
			c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) corev1.ConditionStatus {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// conditions mirrors the VMI's conditions onto the VM, says Ready=False when there is no VMI, and
// RestartRequired=True while the VMI runs an outdated template. KubeVirt keeps RestartRequired
// until the next start; here it goes with the VMI, as only a VMI can be outdated.
// Transition times are kept while a condition's status stays the same, so the status does not
// churn.
func conditions(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, now time.Time) []kubevirtv1.VirtualMachineCondition {
	var out []kubevirtv1.VirtualMachineCondition
	prev := map[kubevirtv1.VirtualMachineConditionType]kubevirtv1.VirtualMachineCondition{}
	for _, c := range vm.Status.Conditions {
		prev[c.Type] = c
	}
	add := func(c kubevirtv1.VirtualMachineCondition) {
		if p, ok := prev[c.Type]; ok && p.Status == c.Status {
			c.LastTransitionTime = p.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
		out = append(out, c)
	}
	if vmi == nil {
		add(kubevirtv1.VirtualMachineCondition{
			Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse,
			Reason: "VMINotExists", Message: "VMI does not exist",
		})
		return out
	}
	for _, c := range vmi.Status.Conditions {
		add(kubevirtv1.VirtualMachineCondition{
			Type: kubevirtv1.VirtualMachineConditionType(c.Type), Status: c.Status,
			Reason: c.Reason, Message: c.Message, LastProbeTime: c.LastProbeTime, LastTransitionTime: c.LastTransitionTime,
		})
	}
	if vmiCondition(vmi, kubevirtv1.VirtualMachineInstanceReady) == corev1.ConditionUnknown {
		add(kubevirtv1.VirtualMachineCondition{
			Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse,
			Reason: "VMINotReady", Message: "VMI is not ready yet",
		})
	}
	if restartRequired(vm, vmi) {
		add(restartRequiredCondition())
	}
	return out
}
