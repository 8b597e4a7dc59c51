package vmi

import (
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// ReasonPVCNotFound is KubeVirt's reason on Synchronized=False while a VMI waits for a claim its
// volumes use: no launcher Pod is made before every claim exists.
const ReasonPVCNotFound = "FailedPvcNotFound"

// ClaimNames lists the PersistentVolumeClaims the VMI's volumes use (persistentVolumeClaim and
// ephemeral volumes), in volume order.
func ClaimNames(vmi *kubevirtv1.VirtualMachineInstance) []string {
	var out []string
	for i := range vmi.Spec.Volumes {
		if claim, ok := launcherapi.ClaimName(&vmi.Spec.Volumes[i]); ok {
			out = append(out, claim)
		}
	}
	return out
}

// ClaimsRecorded reports whether the status already holds the claim of every PVC volume.
func ClaimsRecorded(vmi *kubevirtv1.VirtualMachineInstance) bool {
	recorded := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		recorded[s.Name] = s.PersistentVolumeClaimInfo != nil
	}
	for i := range vmi.Spec.Volumes {
		if _, ok := launcherapi.ClaimName(&vmi.Spec.Volumes[i]); ok && !recorded[vmi.Spec.Volumes[i].Name] {
			return false
		}
	}
	return true
}

// VolumeStatus returns st's volume status with the claim of every PVC volume recorded, as
// KubeVirt's controller does: the launcher cannot read the claim, and sizes the disk image of an
// empty filesystem claim from it. claims holds the claims that exist, by name; a volume whose
// claim is missing keeps what it had. Entries of other volumes stay as they are.
func VolumeStatus(vmi *kubevirtv1.VirtualMachineInstance, st []kubevirtv1.VolumeStatus, claims map[string]*corev1.PersistentVolumeClaim) []kubevirtv1.VolumeStatus {
	out := make([]kubevirtv1.VolumeStatus, len(st))
	index := map[string]int{}
	for i := range st {
		out[i] = *st[i].DeepCopy()
		index[st[i].Name] = i
	}
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		name, ok := launcherapi.ClaimName(v)
		if !ok {
			continue
		}
		pvc := claims[name]
		if pvc == nil {
			continue
		}
		i, ok := index[v.Name]
		if !ok {
			out = append(out, kubevirtv1.VolumeStatus{Name: v.Name})
			i = len(out) - 1
			index[v.Name] = i
		}
		out[i].PersistentVolumeClaimInfo = claimInfo(pvc)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func claimInfo(pvc *corev1.PersistentVolumeClaim) *kubevirtv1.PersistentVolumeClaimInfo {
	mode := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		mode = *pvc.Spec.VolumeMode
	}
	info := &kubevirtv1.PersistentVolumeClaimInfo{
		ClaimName:   pvc.Name,
		AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), pvc.Spec.AccessModes...),
		VolumeMode:  &mode,
	}
	if len(pvc.Status.Capacity) > 0 {
		info.Capacity = pvc.Status.Capacity.DeepCopy()
	}
	if len(pvc.Spec.Resources.Requests) > 0 {
		info.Requests = pvc.Spec.Resources.Requests.DeepCopy()
	}
	return info
}

// launcherVolumeDevices are the compute container's devices: every claim in volume mode Block
// (as the volume status records it) at launcherapi.VolumeDevicePath, where the launcher opens it.
func launcherVolumeDevices(vmi *kubevirtv1.VirtualMachineInstance) []corev1.VolumeDevice {
	var out []corev1.VolumeDevice
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		if _, ok := launcherapi.ClaimName(v); ok && launcherapi.BlockVolume(vmi, v.Name) {
			out = append(out, corev1.VolumeDevice{Name: v.Name, DevicePath: launcherapi.VolumeDevicePath(v.Name)})
		}
	}
	return out
}

// hostDiskVolumes mount the directory of every hostDisk image into the compute container at
// <pvcMountDir>/<volume>, as KubeVirt does; the launcher finds (or creates) the image there.
func hostDiskVolumes(vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, v := range vmi.Spec.Volumes {
		if v.HostDisk == nil {
			continue
		}
		// Only DiskOrCreate may make the directory; a Disk's image must be there already.
		dirType := corev1.HostPathDirectory
		if v.HostDisk.Type == kubevirtv1.HostDiskExistsOrCreate {
			dirType = corev1.HostPathDirectoryOrCreate
		}
		vols = append(vols, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: filepath.Dir(v.HostDisk.Path), Type: &dirType},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: pvcMountDir + "/" + v.Name})
	}
	return vols, mounts
}

// missingClaimMessage is KubeVirt's message for a VMI whose claim does not exist.
func missingClaimMessage(namespace, claim string) string {
	return fmt.Sprintf("PVC %s/%s does not exist, waiting for it to appear", namespace, claim)
}

// configVolumes are the Pod volumes of the VMI's configMap, secret, downwardAPI and sysprep volumes
// that a disk uses, mounted read-only where the launcher makes their ISOs from
// (launcherapi.ConfigVolumeDir), as KubeVirt does; a serviceAccount volume needs none: the Pod
// runs under that account (launcherServiceAccount) and has its token mounted anyway.
func configVolumes(vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Volume, []corev1.VolumeMount) {
	disks := map[string]bool{}
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		disks[d.Name] = true
	}
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		src, ok := configVolumeSource(v)
		if !ok || !disks[v.Name] {
			continue
		}
		dir, _ := launcherapi.ConfigVolumeDir(v)
		vols = append(vols, corev1.Volume{Name: v.Name, VolumeSource: src})
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: dir, ReadOnly: true})
	}
	return vols, mounts
}

// configVolumeSource is the Pod volume that holds the files of a configMap, secret, downwardAPI
// or sysprep volume.
func configVolumeSource(v *kubevirtv1.Volume) (corev1.VolumeSource, bool) {
	switch {
	case v.ConfigMap != nil:
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: v.ConfigMap.LocalObjectReference, Optional: v.ConfigMap.Optional}}, true
	case v.Secret != nil:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName, Optional: v.Secret.Optional}}, true
	case v.DownwardAPI != nil:
		return corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: v.DownwardAPI.Fields}}, true
	case v.Sysprep != nil && v.Sysprep.Secret != nil:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.Sysprep.Secret.Name}}, true
	case v.Sysprep != nil && v.Sysprep.ConfigMap != nil:
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: *v.Sysprep.ConfigMap}}, true
	}
	return corev1.VolumeSource{}, false
}

// launcherServiceAccount is the account of the VMI's serviceAccount volume, which the launcher Pod
// runs under so that its token is mounted (KubeVirt's way to hand a guest the token); "" when
// the VMI has none.
func launcherServiceAccount(vmi *kubevirtv1.VirtualMachineInstance) string {
	for _, v := range vmi.Spec.Volumes {
		if v.ServiceAccount != nil {
			return v.ServiceAccount.ServiceAccountName
		}
	}
	return ""
}
