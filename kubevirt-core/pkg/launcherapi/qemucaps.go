package launcherapi

import corev1 "k8s.io/api/core/v1"

// The QEMU capabilities a node's libvirt daemons share. Every launcher has a libvirtd of its own,
// and a libvirtd that has never seen the node's QEMU probes it first (several seconds of QEMU
// start-ups and QMP queries, each launcher again). The node labeller, whose libvirtd probes the
// same QEMU with the same configuration, leaves libvirt's cache files in a directory of the node;
// launchers mount it read-only and seed their libvirtd's cache from it. libvirt checks each file
// against the QEMU and libvirt binaries, the kernel and the CPU, and probes again if one differs,
// so a stale file costs only the time it was meant to save.
const (
	// QEMUCapsVolume is the host directory's volume in the handler Pod and in launcher Pods.
	QEMUCapsVolume = "qemu-capabilities"
	// QEMUCapsHostDir is the directory on the node.
	QEMUCapsHostDir = "/var/lib/d8-virtualization/qemu-capabilities"
	// QEMUCapsDir is where QEMUCapsVolume is mounted in the containers.
	QEMUCapsDir = "/var/lib/kubevirt-qemu-capabilities"
)

// QEMUCapsHostVolume is the volume of QEMUCapsHostDir, created on the node by the first Pod that
// mounts it.
func QEMUCapsHostVolume() corev1.Volume {
	t := corev1.HostPathDirectoryOrCreate
	return corev1.Volume{Name: QEMUCapsVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: QEMUCapsHostDir, Type: &t}}}
}
