package vmop

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmopcondition"
)

// Finalizer keeps an unfinished operation until what it started is cancelled.
const Finalizer = "virtualization.deckhouse.io/vmop-cleanup"

// Step is what one reconcile does for an operation.
type Step int

// The steps.
const (
	// StepNone: nothing to do.
	StepNone Step = iota
	// StepAddFinalizer: the operation is new.
	StepAddFinalizer
	// StepRemoveFinalizer: the operation has finished, or is deleted and nothing it started runs.
	StepRemoveFinalizer
	// StepStatus: write Decision.Status.
	StepStatus
	// StepExecute: send the operation's signal to the internal VM, then write Decision.Status.
	StepExecute
	// StepCancel: delete the operation's migration (if any), then write Decision.Status.
	StepCancel
)

func (s Step) String() string {
	return [...]string{"None", "AddFinalizer", "RemoveFinalizer", "Status", "Execute", "Cancel"}[s]
}

// Inputs are what Decide looks at. Every object but Op may be nil: not there.
type Inputs struct {
	Op *v1alpha2.VirtualMachineOperation
	// VM is the friendly VirtualMachine spec.virtualMachineName names.
	VM *v1alpha2.VirtualMachine
	// VMI is the internal KubeVirt VMI of the same name.
	VMI *kubevirtv1.VirtualMachineInstance
	// Migration is the operation's own VirtualMachineInstanceMigration (MigrationName).
	Migration *kubevirtv1.VirtualMachineInstanceMigration
	// Others are the other unfinished operations on the same machine.
	Others []v1alpha2.VirtualMachineOperation
	Now    time.Time
}

// Decision is the step and the status the operation has after it.
type Decision struct {
	Step   Step
	Status v1alpha2.VirtualMachineOperationStatus
}

// MigrationName is the name of the VirtualMachineInstanceMigration an operation creates.
func MigrationName(op *v1alpha2.VirtualMachineOperation) string { return "vmop-" + op.Name }

// Decide picks the next step for in.Op, level-based: from the objects alone.
func Decide(in Inputs) Decision {
	op := in.Op
	now := metav1.NewTime(in.Now.Truncate(time.Second))
	st := *op.Status.DeepCopy()
	st.ObservedGeneration = op.Generation
	keep := func(step Step) Decision { return Decision{Step: step, Status: st} }
	set := func(phase v1alpha2.VMOPPhase, status metav1.ConditionStatus, reason vmopcondition.ReasonCompleted, msg string) {
		st.Phase = phase
		setCondition(&st, op.Generation, now, vmopcondition.TypeCompleted, status, string(reason), msg)
	}

	if op.DeletionTimestamp != nil {
		if !controllerutil.ContainsFinalizer(op, Finalizer) {
			return keep(StepNone)
		}
		if in.Migration != nil && !in.Migration.IsFinal() {
			st.Phase = v1alpha2.VMOPPhaseTerminating
			return keep(StepCancel)
		}
		return keep(StepRemoveFinalizer)
	}
	if IsFinished(op) {
		if controllerutil.ContainsFinalizer(op, Finalizer) {
			return keep(StepRemoveFinalizer)
		}
		return keep(StepNone)
	}
	if !controllerutil.ContainsFinalizer(op, Finalizer) {
		return keep(StepAddFinalizer)
	}
	if in.VM == nil {
		set(v1alpha2.VMOPPhaseFailed, metav1.ConditionFalse, vmopcondition.ReasonVirtualMachineNotFound,
			fmt.Sprintf("VirtualMachine %s not found", op.Spec.VirtualMachineName))
		return keep(StepStatus)
	}
	if newer := supersededBy(op, in.Others); newer != nil {
		set(v1alpha2.VMOPPhaseSuperseded, metav1.ConditionTrue, vmopcondition.ReasonSuperseded,
			fmt.Sprintf("Superseded by %s with type %s", newer.Name, newer.Spec.Type))
		return keep(StepCancel)
	}
	if signalSent(op) || in.Migration != nil {
		// The signal went out (a migration created by a reconcile whose status write failed counts).
		if isMigration(op) {
			migrationStatus(&st, op, in.Migration, now)
		} else {
			powerStatus(&st, op, in.VMI, now)
		}
		if !signalSent(op) {
			setCondition(&st, op.Generation, now, vmopcondition.TypeSignalSent, metav1.ConditionTrue, string(vmopcondition.ReasonSignalSentSuccess), signalMessage(op))
		}
		return keep(StepStatus)
	}
	if older := olderThan(op, in.Others); len(older) > 0 {
		set(v1alpha2.VMOPPhasePending, metav1.ConditionFalse, vmopcondition.ReasonOtherOperationsAreInProgress,
			"Waiting for the older operations on the VirtualMachine to finish: "+strings.Join(older, ", "))
		return keep(StepStatus)
	}
	if r := checkApplicable(op, in.VM); r != nil {
		set(v1alpha2.VMOPPhaseFailed, metav1.ConditionFalse, r.reason, r.message)
		return keep(StepStatus)
	}
	if isMigration(op) {
		set(v1alpha2.VMOPPhaseInProgress, metav1.ConditionFalse, vmopcondition.ReasonMigrationPending, "The migration is created.")
		st.Progress = "0%"
	} else {
		set(v1alpha2.VMOPPhaseInProgress, metav1.ConditionFalse, vmopcondition.ReasonOperationInProgress, "Waiting for the operation to complete.")
	}
	setCondition(&st, op.Generation, now, vmopcondition.TypeSignalSent, metav1.ConditionTrue, string(vmopcondition.ReasonSignalSentSuccess), signalMessage(op))
	return keep(StepExecute)
}

func signalMessage(op *v1alpha2.VirtualMachineOperation) string {
	return fmt.Sprintf("Sent signal %q to the VirtualMachine.", op.Spec.Type)
}

// SignalFailed is the status of an operation whose signal could not be sent: Failed, never
// tried twice.
func SignalFailed(op *v1alpha2.VirtualMachineOperation, err error, at time.Time) v1alpha2.VirtualMachineOperationStatus {
	now := metav1.NewTime(at.Truncate(time.Second))
	st := *op.Status.DeepCopy()
	st.ObservedGeneration = op.Generation
	st.Phase = v1alpha2.VMOPPhaseFailed
	msg := fmt.Sprintf("Sending signal %q to the VirtualMachine: %v", op.Spec.Type, err)
	setCondition(&st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionFalse, string(vmopcondition.ReasonOperationFailed), msg)
	setCondition(&st, op.Generation, now, vmopcondition.TypeSignalSent, metav1.ConditionFalse, string(vmopcondition.ReasonSignalSentError), msg)
	return st
}

// powerStatus is the status of a Start, Stop or Restart whose signal went out, read from the
// internal VMI: a Start or Restart is done when a VMI created since the operation runs, a Stop
// when none is left.
func powerStatus(st *v1alpha2.VirtualMachineOperationStatus, op *v1alpha2.VirtualMachineOperation, vmi *kubevirtv1.VirtualMachineInstance, now metav1.Time) {
	done := false
	// A VMI that runs from before the operation (a Start of a Stopping machine, a Restart) is
	// not the one asked for. Both times are the apiserver's, so the controller's clock does not
	// matter.
	fresh := vmi != nil && !vmi.CreationTimestamp.Before(&op.CreationTimestamp)
	switch op.Spec.Type {
	case v1alpha2.VMOPTypeStart, v1alpha2.VMOPTypeRestart:
		done = fresh && vmi.Status.Phase == kubevirtv1.Running
	case v1alpha2.VMOPTypeStop:
		done = vmi == nil
	}
	switch {
	case done:
		st.Phase = v1alpha2.VMOPPhaseCompleted
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionTrue, string(vmopcondition.ReasonOperationCompleted), "")
	case op.Spec.Type != v1alpha2.VMOPTypeStop && fresh && vmi.Status.Phase == kubevirtv1.Failed:
		st.Phase = v1alpha2.VMOPPhaseFailed
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionFalse, string(vmopcondition.ReasonOperationFailed),
			"The VirtualMachine's instance failed to start: "+vmiFailure(vmi))
	default:
		st.Phase = v1alpha2.VMOPPhaseInProgress
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionFalse, string(vmopcondition.ReasonOperationInProgress), "Waiting for the operation to complete.")
	}
}

// migrationStatus is the status of a Migrate or Evict from its migration's phase.
func migrationStatus(st *v1alpha2.VirtualMachineOperationStatus, op *v1alpha2.VirtualMachineOperation, mig *kubevirtv1.VirtualMachineInstanceMigration, now metav1.Time) {
	if mig == nil {
		st.Phase = v1alpha2.VMOPPhaseFailed
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionFalse, string(vmopcondition.ReasonOperationFailed),
			fmt.Sprintf("Migration failed: the VirtualMachineInstanceMigration %s is gone", MigrationName(op)))
		return
	}
	switch mig.Status.Phase {
	case kubevirtv1.MigrationSucceeded:
		st.Phase, st.Progress = v1alpha2.VMOPPhaseCompleted, "100%"
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionTrue, string(vmopcondition.ReasonOperationCompleted), "")
	case kubevirtv1.MigrationFailed:
		st.Phase = v1alpha2.VMOPPhaseFailed
		msg := "Migration failed"
		if s := mig.Status.MigrationState; s != nil && s.FailureReason != "" {
			msg += ": " + s.FailureReason
		}
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionFalse, string(vmopcondition.ReasonOperationFailed), msg)
	default:
		st.Phase, st.Progress = v1alpha2.VMOPPhaseInProgress, Progress(mig, now.Time)
		reason, msg := vmopcondition.ReasonMigrationPending, "The migration's target is being prepared ("+phaseOrPending(mig)+")."
		if mig.Status.Phase == kubevirtv1.MigrationRunning {
			reason, msg = vmopcondition.ReasonMigrationRunning, "The guest's memory and disks are being copied to the target."
		}
		setCondition(st, op.Generation, now, vmopcondition.TypeCompleted, metav1.ConditionFalse, string(reason), msg)
	}
}

func phaseOrPending(mig *kubevirtv1.VirtualMachineInstanceMigration) string {
	if mig.Status.Phase == "" {
		return string(kubevirtv1.MigrationPending)
	}
	return string(mig.Status.Phase)
}

// Progress is a migration's progress in percent: a step per phase before the copy, then a
// share of 10% to 90% that grows with the copy's running time (half way after 30 s), as the
// core reports no remaining data.
func Progress(mig *kubevirtv1.VirtualMachineInstanceMigration, now time.Time) string {
	pct := 0
	switch mig.Status.Phase {
	case kubevirtv1.MigrationPhaseUnset, kubevirtv1.MigrationPending:
		pct = 1
	case kubevirtv1.MigrationScheduling:
		pct = 2
	case kubevirtv1.MigrationScheduled, kubevirtv1.MigrationPreparingTarget:
		pct = 3
	case kubevirtv1.MigrationTargetReady:
		pct = 10
	case kubevirtv1.MigrationRunning:
		pct = 10
		if s := mig.Status.MigrationState; s != nil && s.StartTimestamp != nil {
			if d := now.Sub(s.StartTimestamp.Time); d > 0 {
				pct = 10 + int(80*d/(d+30*time.Second))
			}
		}
	case kubevirtv1.MigrationSucceeded:
		pct = 100
	case kubevirtv1.MigrationFailed:
		pct = 0
	}
	return fmt.Sprintf("%d%%", pct)
}

func vmiFailure(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, c := range vmi.Status.Conditions {
		if c.Message != "" {
			return c.Message
		}
	}
	return "phase Failed"
}

// supersededBy is the newest of the newer operations that replace op, or nil.
func supersededBy(op *v1alpha2.VirtualMachineOperation, others []v1alpha2.VirtualMachineOperation) *v1alpha2.VirtualMachineOperation {
	var by *v1alpha2.VirtualMachineOperation
	for i := range others {
		o := &others[i]
		if o.Name == op.Name || IsFinished(o) || !IsOlder(op, o) || !CanSupersede(op, o) {
			continue
		}
		if by == nil || IsOlder(by, o) {
			by = o
		}
	}
	return by
}

// olderThan names the unfinished operations created before op, oldest first.
func olderThan(op *v1alpha2.VirtualMachineOperation, others []v1alpha2.VirtualMachineOperation) []string {
	var older []*v1alpha2.VirtualMachineOperation
	for i := range others {
		o := &others[i]
		if o.Name != op.Name && !IsFinished(o) && IsOlder(o, op) {
			older = append(older, o)
		}
	}
	for i := 1; i < len(older); i++ {
		for j := i; j > 0 && IsOlder(older[j], older[j-1]); j-- {
			older[j], older[j-1] = older[j-1], older[j]
		}
	}
	names := make([]string, len(older))
	for i, o := range older {
		names[i] = fmt.Sprintf("%s (%s)", o.Name, o.Spec.Type)
	}
	return names
}

func signalSent(op *v1alpha2.VirtualMachineOperation) bool {
	return meta.IsStatusConditionTrue(op.Status.Conditions, string(vmopcondition.TypeSignalSent))
}

// setCondition sets a condition; its transition time changes only with its status.
func setCondition(st *v1alpha2.VirtualMachineOperationStatus, gen int64, now metav1.Time, t vmopcondition.Type, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: string(t), Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now,
	})
}
