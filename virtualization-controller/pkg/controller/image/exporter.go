package image

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/kubename"
)

// An image made from a VirtualDisk is read from the disk's claim by an exporter: the importer
// binary with --export-file, in a Pod next to the claim (the disk's namespace), serving the disk
// with a token of its own. The importer in the module's namespace reads it over HTTP with that
// token, so DVCR's push credentials never leave the module's namespace. The exporter lives while
// the import runs and goes with the importer.

// Where the exporter finds the disk: a Filesystem claim's disk.img, a Block claim's device.
const (
	exportMountDir = "/source"
	exportDevice   = "/dev/source"
)

// ExporterName is the name of the exporter Pod (and its Secret) of the image key of kind short,
// in the disk's namespace: "vi-exporter-<name>", "cvi-exporter-<name>".
func ExporterName(short string, key client.ObjectKey) string {
	return kubename.Join(short, "exporter", key.Name)
}

// exporterMeta is the ObjectMeta of img's exporter Pod and Secret in namespace: labelled and
// annotated as its importer (so the Pod watch finds the image), owned by the image (a
// ClusterVirtualImage, or a VirtualImage of the disk's own namespace) so they never outlive it.
func (c PodConfig) exporterMeta(k Kind, img Image, namespace string) metav1.ObjectMeta {
	m := c.ownedMeta(k, img, ExporterName(k.Short(), client.ObjectKeyFromObject(img.Object)), "exporter")
	m.Namespace = namespace
	return m
}

// ExporterSecret holds the token img's exporter takes; it is in the disk's namespace.
func (c PodConfig) ExporterSecret(k Kind, img Image, namespace, token string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: c.exporterMeta(k, img, namespace), Type: corev1.SecretTypeOpaque, Data: map[string][]byte{importerpod.KeyExportToken: []byte(token)}}
}

// ExporterPod is the one builder of img's exporter: the importer binary serving disk's claim
// (a Filesystem claim mounted read-only) with the token in its Secret (ExporterSecret, same name).
func (c PodConfig) ExporterPod(k Kind, img Image, namespace string, disk DiskRef) *corev1.Pod {
	m := c.exporterMeta(k, img, namespace)
	file := path.Join(exportMountDir, "disk.img")
	if disk.Block {
		file = exportDevice
	}
	container := importerpod.ExportContainer(c.Image, c.Log, importerpod.Flag(contract.FlagExportFile, file))
	if disk.Block {
		container.VolumeDevices = []corev1.VolumeDevice{{Name: "disk", DevicePath: exportDevice}}
	} else {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "disk", MountPath: exportMountDir, ReadOnly: true})
	}
	volumes := []corev1.Volume{
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: m.Name}}},
		{Name: "disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: disk.Claim, ReadOnly: !disk.Block,
		}}},
	}
	return &corev1.Pod{ObjectMeta: m, Spec: importerpod.Spec(container, volumes)}
}
