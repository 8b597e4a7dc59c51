package vmi

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/containerdisk"
)

// The launcher Pod's parts for containerDisk volumes, as KubeVirt names them: an init container
// copies container-disk from the launcher image into an emptyDir, and one container per volume,
// "volume<name>", runs it on the volume's image, serving the disk to the compute container over
// the container-disks emptyDir (pkg/containerdisk). The binary's directory is under /var/run,
// not KubeVirt's /init/usr/bin: a runtime that creates mount points on the node's root (the local
// stack's node agent) then leaves nothing outside a tmpfs.
const (
	containerDisksVol    = "container-disks"
	binShareVol          = "virt-bin-share-dir"
	binShareDir          = "/var/run/kubevirt-bin"
	containerDiskBinary  = "container-disk"
	containerDiskInit    = "container-disk-binary"
	containerDiskPrefix  = "volume"
	containerDiskCommand = binShareDir + "/" + containerDiskBinary
)

// A containerDisk container only holds a file open: KubeVirt's small requests.
var containerDiskResources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("10m"),
	corev1.ResourceMemory: resource.MustParse("40Mi"),
}}

func hasContainerDisk(vmi *kubevirtv1.VirtualMachineInstance) bool {
	for _, v := range vmi.Spec.Volumes {
		if v.ContainerDisk != nil {
			return true
		}
	}
	return false
}

// containerDiskVolumes are the emptyDirs the containerDisk containers share with the compute
// container and the init container, none without a containerDisk.
func containerDiskVolumes(vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Volume, []corev1.VolumeMount) {
	if !hasContainerDisk(vmi) {
		return nil, nil
	}
	empty := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	// The compute container connects to the sockets, and removes them when it ends.
	return []corev1.Volume{empty(containerDisksVol), empty(binShareVol)},
		[]corev1.VolumeMount{{Name: containerDisksVol, MountPath: containerdisk.Dir}}
}

// containerDiskContainers are the init container and the one container per containerDisk
// volume; the launcher image's container-disk runs in each.
func containerDiskContainers(vmi *kubevirtv1.VirtualMachineInstance, cfg LauncherConfig) (initContainers, containers []corev1.Container) {
	if !hasContainerDisk(vmi) {
		return nil, nil
	}
	bin := corev1.VolumeMount{Name: binShareVol, MountPath: binShareDir}
	initContainers = []corev1.Container{{
		Name:            containerDiskInit,
		Image:           cfg.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{containerDiskBinary, "--copy-to", containerDiskCommand},
		Resources:       containerDiskResources,
		VolumeMounts:    []corev1.VolumeMount{bin},
	}}
	bin.ReadOnly = true
	for _, v := range vmi.Spec.Volumes {
		cd := v.ContainerDisk
		if cd == nil {
			continue
		}
		cmd := []string{containerDiskCommand, "--socket", containerdisk.Socket(containerdisk.Dir, v.Name)}
		if cd.Path != "" {
			cmd = append(cmd, "--disk-path", cd.Path)
		}
		containers = append(containers, corev1.Container{
			Name:            containerDiskPrefix + v.Name,
			Image:           cd.Image,
			ImagePullPolicy: cd.ImagePullPolicy,
			Command:         append(cmd, cfg.Log.Args()...),
			Resources:       containerDiskResources,
			VolumeMounts:    []corev1.VolumeMount{{Name: containerDisksVol, MountPath: containerdisk.Dir}, bin},
		})
	}
	return initContainers, containers
}

// imagePullSecrets are the containerDisks' pull secrets, each once, in volume order.
func imagePullSecrets(vmi *kubevirtv1.VirtualMachineInstance) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	seen := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		if cd := v.ContainerDisk; cd != nil && cd.ImagePullSecret != "" && !seen[cd.ImagePullSecret] {
			seen[cd.ImagePullSecret] = true
			out = append(out, corev1.LocalObjectReference{Name: cd.ImagePullSecret})
		}
	}
	return out
}
