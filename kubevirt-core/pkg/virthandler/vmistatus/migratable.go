package vmistatus

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// AllowPodBridgeMigration is the annotation that lets a VMI whose pod network is bound as a
// bridge migrate all the same (its address changes with the Pod).
const AllowPodBridgeMigration = "kubevirt.io/allow-pod-bridge-network-live-migration"

// LiveMigratable is the VMI's LiveMigratable condition, decided as KubeVirt's virt-handler does:
// False with the first reason found (its disks, its interfaces, its host devices), True otherwise.
// A claim is shared when virt-controller recorded ReadWriteMany among its access modes.
func LiveMigratable(vmi *kubevirtv1.VirtualMachineInstance) kubevirtv1.VirtualMachineInstanceCondition {
	reason, msg := notMigratable(vmi)
	if reason == "" {
		return kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionTrue}
	}
	return kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: corev1.ConditionFalse,
		Reason: reason, Message: msg}
}

// notMigratable is the reason and message why vmi cannot migrate, empty when it can.
func notMigratable(vmi *kubevirtv1.VirtualMachineInstance) (string, string) {
	for _, v := range vmi.Spec.Volumes {
		if msg := volumeNotMigratable(vmi, v); msg != "" {
			return kubevirtv1.VirtualMachineInstanceReasonDisksNotMigratable, msg
		}
	}
	if msg := interfacesNotMigratable(vmi); msg != "" {
		return kubevirtv1.VirtualMachineInstanceReasonInterfaceNotMigratable, msg
	}
	if len(vmi.Spec.Domain.Devices.HostDevices) > 0 || len(vmi.Spec.Domain.Devices.GPUs) > 0 {
		return kubevirtv1.VirtualMachineInstanceReasonHostDeviceNotMigratable, "VMI uses a PCI host devices"
	}
	return "", ""
}

// volumeNotMigratable says why v keeps vmi where it is: a claim that is not shared, or a host
// disk that is not. Other volumes (containerDisks, cloud-init, ...) are copied or made again on
// the target.
func volumeNotMigratable(vmi *kubevirtv1.VirtualMachineInstance, v kubevirtv1.Volume) string {
	claim := ""
	switch {
	case v.PersistentVolumeClaim != nil:
		claim = v.PersistentVolumeClaim.ClaimName
	case v.DataVolume != nil:
		claim = v.DataVolume.Name
	case v.HostDisk != nil:
		if v.HostDisk.Shared == nil || !*v.HostDisk.Shared {
			return "cannot migrate VMI with non-shared HostDisk"
		}
		return ""
	default:
		return ""
	}
	for _, s := range vmi.Status.VolumeStatus {
		if s.Name == v.Name && s.PersistentVolumeClaimInfo != nil {
			if slices.Contains(s.PersistentVolumeClaimInfo.AccessModes, corev1.ReadWriteMany) {
				return ""
			}
			break
		}
	}
	return fmt.Sprintf("cannot migrate VMI: PVC %s is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", claim)
}

// interfacesNotMigratable refuses a bridge on the pod network unless the VMI allows it.
func interfacesNotMigratable(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi.Annotations[AllowPodBridgeMigration] != "" {
		return ""
	}
	pod := map[string]bool{}
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			pod[n.Name] = true
		}
	}
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		if i.Bridge != nil && pod[i.Name] {
			return "cannot migrate VMI which does not use masquerade, bridge with " + AllowPodBridgeMigration +
				" VM annotation or a migratable plugin to connect to the pod network"
		}
	}
	return ""
}
