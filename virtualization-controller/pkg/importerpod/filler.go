package importerpod

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// A filler is an importer next to a claim in a user's namespace that copies an image from its
// DVCR exporter (DVCRExporter) into the claim, holding only that exporter's token: an image kept
// on a claim (VirtualImage storage PersistentVolumeClaim), an image copied for a hot-plug.

const (
	fillerSourceDir  = "/etc/importer/source"
	fillerScratchDir = "/scratch"
	fillerDataDir    = "/data"
	fillerDevice     = "/dev/d8v-image"
)

// FillerSecret is a filler's Secret (meta): the token of the exporter it reads.
func FillerSecret(meta metav1.ObjectMeta, token []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{KeyExportToken: token}}
}

// FillerPod is the one builder of a filler (meta; its Secret has the same name): the importer
// image, logging as log says, copying the disk an exporter serves at url into claim, as a
// disk.img of size bytes or onto the Block device.
func FillerPod(image string, log logopts.Options, meta metav1.ObjectMeta, url string, claim *corev1.PersistentVolumeClaim, size int64) *corev1.Pod {
	container := Container(image, log)
	container.Args = append(container.Args,
		Flag(contract.FlagSourceURL, url),
		Flag(contract.FlagSourceTokenFile, path.Join(fillerSourceDir, KeyExportToken)),
		Flag(contract.FlagScratchDir, fillerScratchDir),
		Flag(contract.FlagMetricsAddress, ":"+strconv.Itoa(MetricsPort)),
	)
	container.VolumeMounts = []corev1.VolumeMount{
		{Name: "source", MountPath: fillerSourceDir, ReadOnly: true},
		{Name: "scratch", MountPath: fillerScratchDir},
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		container.VolumeDevices = []corev1.VolumeDevice{{Name: "image", DevicePath: fillerDevice}}
		container.Args = append(container.Args, Flag(contract.FlagDestinationFile, fillerDevice))
	} else {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "image", MountPath: fillerDataDir})
		container.Args = append(container.Args, Flag(contract.FlagDestinationFile, path.Join(fillerDataDir, "disk.img")),
			Flag(contract.FlagCapacity, strconv.FormatInt(size, 10)))
	}
	volumes := []corev1.Volume{
		{Name: "source", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: meta.Name}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "image", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}},
	}
	return &corev1.Pod{ObjectMeta: meta, Spec: Spec(container, volumes)}
}
