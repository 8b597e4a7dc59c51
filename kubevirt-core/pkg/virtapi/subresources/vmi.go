package subresources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var vmiResource = kubevirtv1.Resource("virtualmachineinstance")

func vmiConflict(name, msg string) *apierrors.StatusError {
	return apierrors.NewConflict(vmiResource, name, fmt.Errorf("%s", msg))
}

func hasCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType, status corev1.ConditionStatus) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t && (status == "" || c.Status == status) {
			return true
		}
	}
	return false
}

// ValidateVMICommand answers a VMI command the way KubeVirt does before the command reaches the
// node: nil means the VMI is in a state where the command can run.
func ValidateVMICommand(cmd string, vmi *kubevirtv1.VirtualMachineInstance) *apierrors.StatusError {
	running := vmi.Status.Phase == kubevirtv1.Running
	switch cmd {
	case "pause":
		if !running {
			return vmiConflict(vmi.Name, "VM is not running")
		}
		if vmi.Spec.LivenessProbe != nil {
			//lint:ignore ST1005 KubeVirt's exact message, which clients match on
			return apierrors.NewForbidden(vmiResource, vmi.Name, fmt.Errorf("Pausing VMIs with LivenessProbe is currently not supported"))
		}
		if hasCondition(vmi, kubevirtv1.VirtualMachineInstancePaused, "") {
			return vmiConflict(vmi.Name, "VMI is already paused")
		}
	case "unpause":
		if !running || !hasCondition(vmi, kubevirtv1.VirtualMachineInstancePaused, "") {
			return vmiConflict(vmi.Name, "VMI is not paused")
		}
	case "freeze", "softreboot", "reset":
		if !running {
			return vmiConflict(vmi.Name, "VM is not running")
		}
		if cmd != "freeze" && hasCondition(vmi, kubevirtv1.VirtualMachineInstancePaused, corev1.ConditionTrue) {
			return vmiConflict(vmi.Name, "VMI is paused")
		}
	case "unfreeze":
		if !running {
			return vmiConflict(vmi.Name, "VMI is not running")
		}
	case "console", "vnc":
		if !running {
			// Streams answer 400, not 409: there is nothing to connect to yet.
			return apierrors.NewBadRequest("VMI is not running")
		}
	}
	return nil
}
