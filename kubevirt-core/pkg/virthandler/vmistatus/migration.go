package vmistatus

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// Live migration as virt-handler sees it. virt-controller hands a migration over by writing
// status.migrationState (source and target node and Pod, the migration's UID) and labelling the
// VMI with kubevirt.io/migrationTargetNodeName. Then:
//
//   - the target node's handler has its launcher prepare (TargetPrepared) and publishes where the
//     source reaches it: targetNodeAddress and targetDirectMigrationNodePorts;
//   - the source node's handler sees the address and tells its launcher to migrate
//     (SourceCommand), and mirrors the launcher's progress into the state: startTimestamp, then
//     completed or failed with endTimestamp (in Compute);
//   - once the guest runs on the target, the target's handler takes the VMI over (TakeOver):
//     status.nodeName and the kubevirt.io/nodeName label move to its node.

// MigrationTarget reports whether node is the target of the VMI's migration and the guest has
// not been taken over yet: until then the target's handler drives only the migration.
func MigrationTarget(vmi *kubevirtv1.VirtualMachineInstance, node string) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && ms.MigrationUID != "" && ms.TargetNode == node && vmi.Status.NodeName != node && !ms.Failed
}

// migratingOut reports whether the VMI's migration leaves its current node and is unfinished.
func migratingOut(vmi *kubevirtv1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return ms != nil && ms.MigrationUID != "" && ms.SourceNode == vmi.Status.NodeName && ms.TargetNode != "" &&
		ms.TargetNode != vmi.Status.NodeName && !ms.Completed && !ms.Failed
}

// movedAway reports whether the VMI's guest left its current node: its launcher ending is not
// the guest's end, and the target's handler is about to take the VMI over.
func movedAway(st *kubevirtv1.VirtualMachineInstanceStatus, pod *corev1.Pod, dom *launcherapi.DomainStatus) bool {
	if dom != nil && dom.Result != nil && dom.Result.Reason == ReasonMigrated || launcherMigrated(pod) {
		return true
	}
	ms := st.MigrationState
	return ms != nil && ms.Completed && ms.SourceNode == st.NodeName && ms.TargetNode != st.NodeName
}

// launcherMigrated reports whether the Pod's launcher ended because its guest moved away, as its
// termination message tells (the handler may have missed the launcher's final status).
func launcherMigrated(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && cs.Name == launcherpod.ComputeContainer && term.ExitCode == 0 {
			var res launcherapi.Result
			return json.Unmarshal([]byte(term.Message), &res) == nil && res.Reason == ReasonMigrated
		}
	}
	return false
}

// ReasonMigrated is the launcher's result reason once its guest moved away (launcher.ReasonMigrated).
const ReasonMigrated = "Migrated"

// SourceCommand is what the source's handler asks its launcher for: a migration to start, or one
// to cancel. Both nil: nothing.
func SourceCommand(vmi *kubevirtv1.VirtualMachineInstance, dom *launcherapi.DomainStatus) (*launcherapi.MigrateRequest, *launcherapi.CancelMigrationRequest) {
	if !migratingOut(vmi) || vmi.DeletionTimestamp != nil || dom == nil || !dom.Defined || dom.Result != nil {
		return nil, nil
	}
	ms := vmi.Status.MigrationState
	uid := string(ms.MigrationUID)
	mine := dom.Migration != nil && dom.Migration.Role == launcherapi.MigrationRoleSource && dom.Migration.UID == uid
	if ms.AbortRequested {
		// Also when the launcher has not started it: it then records the migration as aborted,
		// and a Migrate that was on its way does nothing.
		if !mine || !dom.Migration.Completed && !dom.Migration.Failed {
			return nil, &launcherapi.CancelMigrationRequest{MigrationUID: uid}
		}
		return nil, nil
	}
	if mine || ms.TargetNodeAddress == "" {
		return nil, nil
	}
	ports, ok := launcherapi.PortsFromNodePorts(ms.TargetDirectMigrationNodePorts)
	if !ok {
		return nil, nil
	}
	return &launcherapi.MigrateRequest{MigrationUID: uid, TargetAddress: ms.TargetNodeAddress, Ports: ports}, nil
}

// sourceMigration mirrors the source launcher's migration into the VMI's migration state, and
// fails a migration aborted before the launcher started it.
func sourceMigration(vmi *kubevirtv1.VirtualMachineInstance, st *kubevirtv1.VirtualMachineInstanceStatus, dom *launcherapi.DomainStatus, now time.Time) {
	if !migratingOut(vmi) {
		return
	}
	ms := st.MigrationState.DeepCopy()
	st.MigrationState = ms
	end := func(t *metav1.Time) {
		if ms.EndTimestamp != nil {
			return
		}
		if t == nil {
			n := metav1.NewTime(now.Truncate(time.Second))
			t = &n
		}
		ms.EndTimestamp = t.DeepCopy()
	}
	m := dom.Migration
	if m == nil || m.Role != launcherapi.MigrationRoleSource || m.UID != string(ms.MigrationUID) {
		return
	}
	if ms.StartTimestamp == nil && m.StartTime != nil {
		ms.StartTimestamp = m.StartTime.DeepCopy()
	}
	ms.Mode = kubevirtv1.MigrationPreCopy
	st.MigrationMethod = kubevirtv1.LiveMigration
	if hasLocalDisks(vmi) {
		st.MigrationMethod = kubevirtv1.BlockMigration
	}
	switch {
	case m.Completed:
		ms.Completed = true
		end(m.EndTime)
	case m.Failed:
		ms.Failed = true
		ms.FailureReason = m.Message
		if m.Aborted {
			ms.AbortStatus = kubevirtv1.MigrationAbortSucceeded
		}
		end(m.EndTime)
	case ms.AbortRequested && ms.AbortStatus == "":
		ms.AbortStatus = kubevirtv1.MigrationAbortInProgress
	}
}

// hasLocalDisks reports whether the VMI has disks that live in its launcher (containerDisk
// overlays, emptyDisks), which a migration copies.
func hasLocalDisks(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, v := range vmi.Spec.Volumes {
		if v.ContainerDisk != nil || v.EmptyDisk != nil {
			return true
		}
	}
	return false
}

// TargetPrepareNeeded reports whether the target's handler must (still) ask its launcher to
// prepare for the migration.
func TargetPrepareNeeded(vmi *kubevirtv1.VirtualMachineInstance, dom *launcherapi.DomainStatus) bool {
	ms := vmi.Status.MigrationState
	if ms == nil || vmi.DeletionTimestamp != nil || ms.Completed || ms.Failed || ms.AbortRequested {
		return false
	}
	if dom == nil {
		return true
	}
	return dom.Result == nil && (dom.Migration == nil || dom.Migration.UID != string(ms.MigrationUID))
}

// Target computes the VMI's status on the migration's target node: it publishes the target's
// address once the launcher is ready, and once the guest runs there it takes the VMI over (the
// returned bool), computing the status as for a VMI of this node. The caller then moves the
// node labels.
func Target(vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, dom *launcherapi.DomainStatus, node string, now time.Time) (kubevirtv1.VirtualMachineInstanceStatus, bool) {
	st := *vmi.Status.DeepCopy()
	if !MigrationTarget(vmi, node) || dom == nil || dom.Migration == nil || pod == nil {
		return st, false
	}
	ms := st.MigrationState
	m := dom.Migration
	if m.Role != launcherapi.MigrationRoleTarget || m.UID != string(ms.MigrationUID) {
		return st, false
	}
	if m.TargetReady && ms.TargetNodeAddress == "" && pod.Status.PodIP != "" {
		ports := launcherapi.DefaultMigrationPorts
		if m.Ports != nil {
			ports = *m.Ports
		}
		ms.TargetNodeAddress = pod.Status.PodIP
		ms.TargetDirectMigrationNodePorts = ports.NodePorts()
	}
	if !m.Completed || !dom.Defined || !running(dom.State) {
		return st, false
	}
	ts := metav1.NewTime(now.Truncate(time.Second))
	ms.TargetNodeDomainDetected = true
	if ms.TargetNodeDomainReadyTimestamp == nil {
		ms.TargetNodeDomainReadyTimestamp = &ts
	}
	// The guest runs here: the migration is complete whether or not the source's handler
	// got to say so.
	ms.Completed = true
	if ms.EndTimestamp == nil {
		ms.EndTimestamp = &ts
		if m.EndTime != nil {
			ms.EndTimestamp = m.EndTime.DeepCopy()
		}
	}
	st.NodeName = node
	moved := vmi.DeepCopy()
	moved.Status = st
	return Compute(moved, pod, dom, now), true
}
