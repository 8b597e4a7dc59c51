// Package migration is virt-controller's VirtualMachineInstanceMigration controller. It accepts a
// migration (Pending), starts the target virt-launcher Pod within KubeVirt's limits (Scheduling),
// sees the Pod run (Scheduled), hands the migration to the nodes' virt-handlers through the VMI's
// status.migrationState (PreparingTarget), follows what they report there (TargetReady, Running,
// Succeeded or Failed), and cleans up: the source Pod after a success, the target Pod after a
// failure. It fails or aborts the migration as KubeVirt does.
//
// The decisions are pure functions of the migration, its VMI, the Pods, the other migrations and
// the clock (this file and pod.go); the reconciler only reads objects and carries decisions out.
package migration

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// KubeVirt's defaults for the limits and timeouts of migrations.
const (
	DefaultParallelMigrationsPerCluster      = 5
	DefaultParallelOutboundMigrationsPerNode = 2
	DefaultUnschedulableTimeout              = 5 * time.Minute
	DefaultPendingTimeout                    = 15 * time.Minute
	// limitRecheck is how soon a migration held back by a limit looks again, as in KubeVirt.
	limitRecheck = 5 * time.Second
)

// Why a migration failed, in the words of KubeVirt's FailedMigration events. They are recorded in
// status.migrationState.failureReason, where kubectl shows them.
const (
	ReasonVMIMissing       = "Migration failed because vmi does not exist."
	ReasonVMIShutdown      = "Migration failed vmi shutdown during migration."
	ReasonAnotherMigration = "VMI is not eligible for migration because another migration job is in progress."
	ReasonCanceled         = "Migration failed due to being canceled"
	ReasonTargetPodDown    = "Migration failed because target pod shutdown during migration"
	ReasonTargetPodRemoved = "Migration target pod was removed during active migration."
)

// Limits bound the migrations in flight, as KubeVirt's migration configuration does.
type Limits struct {
	PerCluster      int
	OutboundPerNode int
	// UnschedulableTimeout deletes a target Pod the scheduler cannot place for this long;
	// PendingTimeout one that stays Pending for any reason. The migration then fails.
	UnschedulableTimeout time.Duration
	PendingTimeout       time.Duration
}

// withDefaults fills unset limits with KubeVirt's defaults.
func (l Limits) withDefaults() Limits {
	if l.PerCluster <= 0 {
		l.PerCluster = DefaultParallelMigrationsPerCluster
	}
	if l.OutboundPerNode <= 0 {
		l.OutboundPerNode = DefaultParallelOutboundMigrationsPerNode
	}
	if l.UnschedulableTimeout <= 0 {
		l.UnschedulableTimeout = DefaultUnschedulableTimeout
	}
	if l.PendingTimeout <= 0 {
		l.PendingTimeout = DefaultPendingTimeout
	}
	return l
}

// withAnnotations applies KubeVirt's per-migration timeout annotations (functional tests use
// them to fail unschedulable targets quickly); malformed values are ignored.
func (l Limits) withAnnotations(m *kubevirtv1.VirtualMachineInstanceMigration) Limits {
	for key, dst := range map[string]*time.Duration{
		kubevirtv1.MigrationUnschedulablePodTimeoutSecondsAnnotation: &l.UnschedulableTimeout,
		kubevirtv1.MigrationPendingPodTimeoutSecondsAnnotation:       &l.PendingTimeout,
	} {
		if v, err := strconv.ParseInt(m.Annotations[key], 10, 64); err == nil && v > 0 {
			*dst = time.Duration(v) * time.Second
		}
	}
	return l
}

// Action is what one reconcile does with the target Pod.
type Action int

const (
	// Nothing leaves the Pods as they are.
	Nothing Action = iota
	// CreateTargetPod starts the target virt-launcher Pod.
	CreateTargetPod
	// DeleteTargetPods removes the target Pods: the migration was aborted or failed, or its Pod
	// timed out.
	DeleteTargetPods
	// DeleteSourcePod removes the source Pod, whose guest moved to the target.
	DeleteSourcePod
)

func (a Action) String() string {
	return [...]string{"Nothing", "CreateTargetPod", "DeleteTargetPods", "DeleteSourcePod"}[a]
}

// Input is everything a decision depends on.
type Input struct {
	Migration *kubevirtv1.VirtualMachineInstanceMigration
	// VMI is the migrated VMI, nil when it does not exist.
	VMI *kubevirtv1.VirtualMachineInstance
	// VMIPods are the VMI's launcher Pods, the target Pods among them.
	VMIPods []corev1.Pod
	// Migrations are all migrations of the cluster, this one included: the limits count them.
	Migrations []kubevirtv1.VirtualMachineInstanceMigration
	Limits     Limits
	Now        time.Time
}

// Decision is the action of one reconcile, the migration's resulting status and whether it
// keeps its finalizer.
type Decision struct {
	Action Action
	Status kubevirtv1.VirtualMachineInstanceMigrationStatus
	// Finalizer says whether kubevirt.io/migrationJobFinalize should be on the migration: while it
	// is unfinished, so that deleting it aborts the migration first.
	Finalizer bool
	// Recheck asks for another look after this long (a limit or a Pod timeout); zero for none.
	Recheck time.Duration
	// Message explains the decision for the log.
	Message string
	// VMI, when set, is written to the VMI before the migration's status: the hand-off, an abort
	// request, or the clean-up after a failure.
	VMI *VMIUpdate
}

// NeedsConfirmation reports whether a decision rests on something the cache may not have seen
// yet, so that it must be made again from the apiserver's objects: a target Pod to start, a VMI
// that seems gone, or a failure of an unfinished migration (the hand-off just written into the
// VMI may not have reached the cache, which would read as a lost hand-off).
func NeedsConfirmation(in Input, d Decision) bool {
	if d.Action == CreateTargetPod {
		return true
	}
	if in.Migration.IsFinal() {
		return false
	}
	return in.VMI == nil || d.Status.Phase == kubevirtv1.MigrationFailed
}

// Running reports whether a migration counts against the limits, as KubeVirt counts them: past
// Pending and not finished.
func Running(m *kubevirtv1.VirtualMachineInstanceMigration) bool {
	switch m.Status.Phase {
	case kubevirtv1.MigrationPhaseUnset, kubevirtv1.MigrationPending, kubevirtv1.MigrationFailed, kubevirtv1.MigrationSucceeded,
		kubevirtv1.MigrationWaitingForSync, kubevirtv1.MigrationSynchronizing:
		return false
	}
	return true
}

// handedOff reports whether the migration ever reached virt-handler (PreparingTarget or later):
// from then on the target Pod is the handler's to clean up, and cancelling means asking the
// source to abort.
func handedOff(m *kubevirtv1.VirtualMachineInstanceMigration) bool {
	for _, t := range m.Status.PhaseTransitionTimestamps {
		switch t.Phase {
		case kubevirtv1.MigrationPreparingTarget, kubevirtv1.MigrationTargetReady, kubevirtv1.MigrationRunning:
			return true
		}
	}
	switch m.Status.Phase {
	case kubevirtv1.MigrationPreparingTarget, kubevirtv1.MigrationTargetReady, kubevirtv1.MigrationRunning:
		return true
	}
	return false
}

// TargetPods picks the Pods this migration created from the VMI's launcher Pods.
func TargetPods(m *kubevirtv1.VirtualMachineInstanceMigration, pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Labels[kubevirtv1.MigrationJobLabel] == string(m.UID) && p.Labels[kubevirtv1.AppLabel] == "virt-launcher" {
			out = append(out, p)
		}
	}
	return out
}

func podDown(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// launcherRunning reports whether the target Pod's launcher runs, as KubeVirt's controller
// judges it: the Pod runs and its compute container is ready. Not the Pod's Ready condition: its
// readiness gate is virt-handler's, set once a guest runs there.
func launcherRunning(p *corev1.Pod) bool {
	if podDown(p) || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == launcherpod.ComputeContainer && !c.Ready {
			return false
		}
	}
	return true
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// activePods counts the VMI's launcher Pods that may run a guest. A second one means a migration
// is already under way, whatever its object says.
func activePods(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		if !podDown(&pods[i]) {
			n++
		}
	}
	return n
}

// Decide chooses the next step of a migration.
func Decide(in Input) Decision {
	m, vmi := in.Migration, in.VMI
	lim := in.Limits.withDefaults().withAnnotations(in.Migration)
	d := Decision{Status: *m.Status.DeepCopy(), Finalizer: !m.IsFinal()}
	targets := TargetPods(m, in.VMIPods)
	var target *corev1.Pod
	for i := range targets {
		if target == nil || (podDown(target) && !podDown(&targets[i])) {
			target = &targets[i]
		}
	}
	// fail ends the migration with reason; d is the decision so far.
	fail := func(d Decision, reason string) Decision {
		d.Status.Phase = kubevirtv1.MigrationFailed
		if d.Status.MigrationState == nil {
			d.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{}
		}
		if d.Status.MigrationState.FailureReason == "" {
			d.Status.MigrationState.FailureReason = reason
		}
		d.Status.MigrationState.Failed = true
		d.Finalizer = false
		d.Message = reason
		if hasLive(targets) && !movedToTarget(m, vmi) {
			d.Action = DeleteTargetPods
		}
		d.VMI = failVMI(m, vmi, d.Status.MigrationState.FailureReason, in.Now)
		return d.stamp(m, in.Now)
	}

	switch {
	case m.IsFinal():
		// A failed migration leaves no target Pod behind, a successful one no source Pod.
		switch {
		case m.Status.Phase == kubevirtv1.MigrationFailed && hasLive(targets) && !movedToTarget(m, vmi):
			d.Action = DeleteTargetPods
		case m.Status.Phase == kubevirtv1.MigrationSucceeded && hasLive(sourcePods(m, in.VMIPods)):
			d.Action = DeleteSourcePod
		}
		if m.Status.Phase == kubevirtv1.MigrationFailed {
			d.VMI = failVMI(m, vmi, "", in.Now)
		}
		return d
	case vmi == nil:
		return fail(d, ReasonVMIMissing)
	case vmi.IsFinal():
		return fail(d, ReasonVMIShutdown)
	case m.DeletionTimestamp != nil && !handedOff(m):
		d.Status.Conditions = setCondition(d.Status.Conditions, kubevirtv1.VirtualMachineInstanceMigrationCondition{
			Type: kubevirtv1.VirtualMachineInstanceMigrationAbortRequested, Status: corev1.ConditionTrue,
		}, in.Now)
		return fail(d, ReasonCanceled)
	case m.Status.Phase == kubevirtv1.MigrationPhaseUnset:
		if owner := vmi.Status.MigrationState; owner != nil && owner.MigrationUID != "" && owner.MigrationUID != m.UID &&
			!owner.Completed && !owner.Failed && unfinished(in.Migrations, owner.MigrationUID) {
			// virt-handler is already moving this guest for another migration.
			return fail(d, ReasonAnotherMigration)
		}
		d.Status.Phase = kubevirtv1.MigrationPending
		d.Message = "migration accepted"
		return d.stamp(m, in.Now)
	case movedToTarget(m, vmi):
		// The guest runs on the target: whatever happens to the Pods now is the VMI's business.
		return follow(in, d, fail)
	case target != nil && podDown(target) && m.Status.Phase != kubevirtv1.MigrationPending:
		return fail(d, ReasonTargetPodDown)
	case target == nil && m.Status.Phase != kubevirtv1.MigrationPending:
		return fail(d, ReasonTargetPodRemoved)
	case m.DeletionTimestamp != nil && !movedToTarget(m, vmi):
		// Handed off: the source's handler cancels the job, and the outcome arrives as usual.
		d.Status.Conditions = setCondition(d.Status.Conditions, kubevirtv1.VirtualMachineInstanceMigrationCondition{
			Type: kubevirtv1.VirtualMachineInstanceMigrationAbortRequested, Status: corev1.ConditionTrue,
		}, in.Now)
		d.VMI = abortVMI(m, vmi)
		return follow(in, d, fail)
	}

	switch m.Status.Phase {
	case kubevirtv1.MigrationPending:
		if target != nil {
			d.Status.Phase = kubevirtv1.MigrationScheduling
			return d.stamp(m, in.Now)
		}
		return startTarget(in, lim, d)
	case kubevirtv1.MigrationScheduling:
		if launcherRunning(target) {
			d.Status.Phase = kubevirtv1.MigrationScheduled
			return d.stamp(m, in.Now)
		}
		return pendingTimeout(target, lim, d, in.Now)
	case kubevirtv1.MigrationScheduled:
		return handOff(in, target, d, fail)
	}
	// PreparingTarget and later follow what the handlers report.
	return follow(in, d, fail)
}

// startTarget creates the target Pod unless a limit holds it back, as KubeVirt does: the VMI must
// run, no other Pod of the VMI may be starting (another migration's target), and the cluster and
// the source node must have room.
func startTarget(in Input, lim Limits, d Decision) Decision {
	m, vmi := in.Migration, in.VMI
	wait := func(msg string) Decision {
		d.Recheck = limitRecheck
		d.Message = msg
		return d
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		// The VMI's own phase change brings the migration back.
		d.Message = "waiting for the VMI to run"
		return d
	}
	if activePods(in.VMIPods) > 1 {
		return wait("waiting: the VMI already has more than one launcher pod")
	}
	cluster, outbound := 0, 0
	for i := range in.Migrations {
		o := &in.Migrations[i]
		if o.UID == m.UID || !Running(o) {
			continue
		}
		if o.Namespace == m.Namespace && o.Spec.VMIName == m.Spec.VMIName {
			return wait("waiting: another migration of the VMI is in progress")
		}
		cluster++
		if st := o.Status.MigrationState; st != nil && st.SourceNode != "" && st.SourceNode == vmi.Status.NodeName {
			outbound++
		}
	}
	if cluster >= lim.PerCluster {
		return wait("waiting: parallel migrations per cluster at the limit")
	}
	if outbound >= lim.OutboundPerNode {
		return wait("waiting: outbound migrations of the source node at the limit")
	}
	d.Action = CreateTargetPod
	d.Status.Phase = kubevirtv1.MigrationScheduling
	if d.Status.MigrationState == nil {
		d.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{}
	}
	d.Status.MigrationState.MigrationUID = m.UID
	d.Status.MigrationState.SourceNode = vmi.Status.NodeName
	for _, p := range in.VMIPods {
		if p.Labels[kubevirtv1.MigrationJobLabel] == "" && !podDown(&p) {
			d.Status.MigrationState.SourcePod = p.Name
		}
	}
	d.Message = "creating target pod"
	return d.stamp(m, in.Now)
}

// pendingTimeout deletes a target Pod that stays Pending too long; the migration then fails on
// the missing Pod. Otherwise it asks to look again when the timeout would strike.
func pendingTimeout(p *corev1.Pod, lim Limits, d Decision, now time.Time) Decision {
	if p.Status.Phase != corev1.PodPending || p.CreationTimestamp.IsZero() {
		return d
	}
	age := now.Sub(p.CreationTimestamp.Time)
	limit := lim.PendingTimeout
	if unschedulable(p) {
		limit = min(limit, lim.UnschedulableTimeout)
	}
	if age >= limit {
		d.Action = DeleteTargetPods
		d.Message = "target pod pending for too long"
		return d
	}
	d.Recheck = limit - age
	return d
}

func hasLive(pods []corev1.Pod) bool {
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// unfinished reports whether the migration with that UID exists and has not finished: a VMI's
// migrationState naming a migration that is gone or final does not block a new one.
func unfinished(ms []kubevirtv1.VirtualMachineInstanceMigration, uid types.UID) bool {
	for i := range ms {
		if ms[i].UID == uid {
			return !ms[i].IsFinal()
		}
	}
	return false
}

// stamp records the time of a phase change, as KubeVirt keeps them in phaseTransitionTimestamps.
func (d Decision) stamp(m *kubevirtv1.VirtualMachineInstanceMigration, now time.Time) Decision {
	if d.Status.Phase == m.Status.Phase {
		return d
	}
	d.Status.PhaseTransitionTimestamps = append(append([]kubevirtv1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp(nil),
		d.Status.PhaseTransitionTimestamps...), kubevirtv1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{
		Phase: d.Status.Phase, PhaseTransitionTimestamp: metav1.NewTime(now.Truncate(time.Second)),
	})
	return d
}

func setCondition(conds []kubevirtv1.VirtualMachineInstanceMigrationCondition, c kubevirtv1.VirtualMachineInstanceMigrationCondition, now time.Time) []kubevirtv1.VirtualMachineInstanceMigrationCondition {
	for _, old := range conds {
		if old.Type == c.Type && old.Status == c.Status {
			return conds
		}
	}
	c.LastProbeTime = metav1.NewTime(now.Truncate(time.Second))
	c.LastTransitionTime = c.LastProbeTime
	out := []kubevirtv1.VirtualMachineInstanceMigrationCondition{}
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
		}
	}
	return append(out, c)
}
