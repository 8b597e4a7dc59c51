// Package vmicond edits the conditions of a VMI status. virt-controller and virt-handler both
// write them, and both must keep transition times stable so that repeated syncs do not churn the
// object.
package vmicond

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Set replaces or adds c and returns a new slice. The transition time stays while the status
// does; a new status gets c's own time, or now when c has none.
func Set(conds []kubevirtv1.VirtualMachineInstanceCondition, c kubevirtv1.VirtualMachineInstanceCondition, now time.Time) []kubevirtv1.VirtualMachineInstanceCondition {
	for i, old := range conds {
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
		out := append([]kubevirtv1.VirtualMachineInstanceCondition(nil), conds...)
		out[i] = c
		return out
	}
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	}
	return append(append([]kubevirtv1.VirtualMachineInstanceCondition(nil), conds...), c)
}

// Remove returns conds without the condition of type t.
func Remove(conds []kubevirtv1.VirtualMachineInstanceCondition, t kubevirtv1.VirtualMachineInstanceConditionType) []kubevirtv1.VirtualMachineInstanceCondition {
	var out []kubevirtv1.VirtualMachineInstanceCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// Get returns the condition of type t, or nil.
func Get(conds []kubevirtv1.VirtualMachineInstanceCondition, t kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstanceCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
