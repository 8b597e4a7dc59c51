package vmisync

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virthandler/hotplug"
)

// EventSource is virt-handler's name in the events it records, as in KubeVirt.
const EventSource = "virt-handler"

// reasonPaused is the pause's reason, which kubevirt.io/api has no SyncEvent for (it has Resumed).
const reasonPaused = "Paused"

// lifecycleEvent is one of KubeVirt's events about a VMI's domain.
type lifecycleEvent struct {
	eventType, reason, action, note string
}

// statusEvents are the events for what a status write of the handler changed: the phase the
// domain reached, a pause or resume, a migration that failed. They are computed from the write
// itself, which the resourceVersion lets succeed once, so each transition is told once however
// often the VMI is reconciled.
func statusEvents(old, cur kubevirtv1.VirtualMachineInstanceStatus) []lifecycleEvent {
	var out []lifecycleEvent
	if cur.Phase != old.Phase {
		switch cur.Phase {
		case kubevirtv1.Running:
			out = append(out, lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.Started.String(), "Start", "VirtualMachineInstance started."})
		case kubevirtv1.Succeeded:
			out = append(out, lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.Stopped.String(), "Stop", "The VirtualMachineInstance was shut down."})
		case kubevirtv1.Failed:
			out = append(out, lifecycleEvent{corev1.EventTypeWarning, kubevirtv1.Stopped.String(), "Stop", "The VirtualMachineInstance crashed."})
		}
	}
	wasPaused, paused := isPaused(old), isPaused(cur)
	switch {
	case paused && !wasPaused:
		out = append(out, lifecycleEvent{corev1.EventTypeNormal, reasonPaused, "Pause", "VirtualMachineInstance paused."})
	case wasPaused && !paused && cur.Phase == kubevirtv1.Running:
		// A guest that ended while paused is Stopped, not resumed.
		out = append(out, lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.Resumed.String(), "Unpause", "VirtualMachineInstance resumed."})
	}
	out = append(out, hotplugFailedEvents(old, cur)...)
	if ms := cur.MigrationState; ms != nil && ms.Failed && !migrationFailed(old, ms.MigrationUID) {
		out = append(out, lifecycleEvent{corev1.EventTypeWarning, kubevirtv1.Migrated.String(), "Migrate",
			fmt.Sprintf("VirtualMachineInstance migration uid %s failed. reason:%s", ms.MigrationUID, ms.FailureReason)})
	}
	return out
}

// hotplugFailedEvents are Warnings for the hotplugged volumes whose attach failed in this write
// (newly, or for another reason than before), with the volume status's message.
func hotplugFailedEvents(old, cur kubevirtv1.VirtualMachineInstanceStatus) []lifecycleEvent {
	before := map[string]string{}
	for _, s := range old.VolumeStatus {
		if s.Reason == hotplug.ReasonFailed {
			before[s.Name] = s.Message
		}
	}
	var out []lifecycleEvent
	for _, s := range cur.VolumeStatus {
		if msg, was := before[s.Name]; s.Reason == hotplug.ReasonFailed && (!was || msg != s.Message) {
			out = append(out, lifecycleEvent{corev1.EventTypeWarning, hotplug.ReasonFailed, "Hotplug", s.Message})
		}
	}
	return out
}

func isPaused(st kubevirtv1.VirtualMachineInstanceStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstancePaused && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func migrationFailed(st kubevirtv1.VirtualMachineInstanceStatus, uid types.UID) bool {
	ms := st.MigrationState
	return ms != nil && ms.Failed && ms.MigrationUID == uid
}

// record records e about v.
func (r *Reconciler) record(v *kubevirtv1.VirtualMachineInstance, e lifecycleEvent) {
	r.recorder.Eventf(v, nil, e.eventType, e.reason, e.action, "%s", e.note)
}

// recordCommand records e about v after a command to the launcher in pod succeeded, once per
// connection to that launcher and key: the handler repeats its commands while the launcher's
// status lags (a Shutdown on every reconcile of a VMI being deleted), the event tells it once.
func (r *Reconciler) recordCommand(v *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, key string, e lifecycleEvent) {
	if r.Conns.Once(pod.UID, key) {
		r.record(v, e)
	}
}

// definedEvent, shutdownEvent, migratingEvent and targetPreparedEvent are KubeVirt's events for
// the handler's commands to the launcher.
var (
	definedEvent        = lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.Created.String(), "Define", "VirtualMachineInstance defined."}
	shutdownEvent       = lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.ShuttingDown.String(), "Shutdown", "Signaled Graceful Shutdown"}
	migratingEvent      = lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.Migrating.String(), "Migrate", "VirtualMachineInstance is migrating."}
	targetPreparedEvent = lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.PreparingTarget.String(), "PrepareMigrationTarget", "VirtualMachineInstance Migration Target Prepared."}
)

// syncFailedEvent is KubeVirt's warning for a sync with the launcher that failed; retries back
// off, and the events API folds repeats into a series.
func syncFailedEvent(err error) lifecycleEvent {
	return lifecycleEvent{corev1.EventTypeWarning, kubevirtv1.SyncFailed.String(), "Sync", err.Error()}
}

// migratedEvent is the target's event once the guest runs on its node.
func migratedEvent(node string) lifecycleEvent {
	return lifecycleEvent{corev1.EventTypeNormal, kubevirtv1.Migrated.String(), "Migrate", "The VirtualMachineInstance migrated to node " + node + "."}
}
