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

// Where the compute container holds the files of the volumes the launcher turns into ISO disks,
// as KubeVirt mounts them: PrivateDir/<kind>/<volume>, and the Pod's service account token
// where every Pod has it.
const (
	ConfigMapSourceDir      = PrivateDir + "/config-map"
	SecretSourceDir         = PrivateDir + "/secret"
	DownwardAPISourceDir    = PrivateDir + "/downwardapi"
	SysprepSourceDir        = PrivateDir + "/sysprep"
	ServiceAccountSourceDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// ConfigVolumeDir is where the compute container holds the files of a configMap, secret,
// downwardAPI, serviceAccount or sysprep volume; false for other volumes.
func ConfigVolumeDir(v *kubevirtv1.Volume) (string, bool) {
	switch {
	case v.ConfigMap != nil:
		return filepath.Join(ConfigMapSourceDir, v.Name), true
	case v.Secret != nil:
		return filepath.Join(SecretSourceDir, v.Name), true
	case v.DownwardAPI != nil:
		return filepath.Join(DownwardAPISourceDir, v.Name), true
	case v.Sysprep != nil:
		return filepath.Join(SysprepSourceDir, v.Name), true
	case v.ServiceAccount != nil:
		return ServiceAccountSourceDir, true
	}
	return "", false
}

// ClaimName is the PersistentVolumeClaim a persistentVolumeClaim or ephemeral volume uses; false
// for other volumes.
func ClaimName(v *kubevirtv1.Volume) (string, bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, true
	case v.Ephemeral != nil && v.Ephemeral.PersistentVolumeClaim != nil:
		return v.Ephemeral.PersistentVolumeClaim.ClaimName, true
	}
	return "", false
}
