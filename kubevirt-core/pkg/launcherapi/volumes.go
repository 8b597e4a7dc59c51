package launcherapi

import (
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// VolumeDevicePath is where the compute container holds the device of a claim in volume mode
// Block: /dev/<volume>, KubeVirt's path.
func VolumeDevicePath(volume string) string { return filepath.Join("/dev", volume) }

// BlockVolume tells whether the VMI's volume of that name is a claim in volume mode Block, as
// virt-controller recorded it in the volume status before it made the launcher Pod: the Pod then
// holds the claim as a device (VolumeDevicePath) rather than a directory with disk.img.
func BlockVolume(vmi *kubevirtv1.VirtualMachineInstance, name string) bool {
	for _, s := range vmi.Status.VolumeStatus {
		if s.Name == name && s.PersistentVolumeClaimInfo != nil {
			m := s.PersistentVolumeClaimInfo.VolumeMode
			return m != nil && *m == corev1.PersistentVolumeBlock
		}
	}
	return false
}
