package vm

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
)

// Event is one event to record: Type is corev1.EventTypeNormal or EventTypeWarning.
type Event struct {
	Type, Reason, Note string
}

// ReasonPhaseChanged is the reason of the event of a phase change.
const ReasonPhaseChanged = "VirtualMachinePhaseChanged"

// warnWhenFalse are the conditions whose turning False is a Warning.
var warnWhenFalse = map[string]bool{
	string(vmcondition.TypeClassReady): true, string(vmcondition.TypeBlockDevicesReady): true,
	string(vmcondition.TypeProvisioningReady): true,
}

// Transitions are the events of the change from old to new status: the phase, then each
// condition whose status or reason changed, in new's order.
func Transitions(old, new *v1alpha2.VirtualMachineStatus) []Event {
	var out []Event
	if old.Phase != new.Phase {
		from := old.Phase
		if from == "" {
			from = "none"
		}
		out = append(out, Event{Type: corev1.EventTypeNormal, Reason: ReasonPhaseChanged, Note: fmt.Sprintf("phase %s -> %s", from, new.Phase)})
	}
	for _, c := range new.Conditions {
		was := meta.FindStatusCondition(old.Conditions, c.Type)
		if was != nil && was.Status == c.Status && was.Reason == c.Reason {
			continue
		}
		t := corev1.EventTypeNormal
		if c.Status == metav1.ConditionFalse && warnWhenFalse[c.Type] {
			t = corev1.EventTypeWarning
		}
		out = append(out, Event{Type: t, Reason: c.Reason, Note: fmt.Sprintf("%s %s: %s", c.Type, c.Status, c.Message)})
	}
	return out
}
