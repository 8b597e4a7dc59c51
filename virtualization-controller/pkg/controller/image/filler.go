package image

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/kubename"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// An image kept on a claim (a VirtualImage with storage PersistentVolumeClaim) is imported into
// DVCR first, as any image (its size and format become known), then a filler, the importer in a
// Pod of the image's namespace, copies it into a claim there from a DVCR exporter in the
// module's namespace (importerpod.DVCRExporter), with that exporter's token only; the DVCR copy
// is deleted once the claim holds the image.

const (
	fillerDataDir = "/data"
	fillerDevice  = "/dev/d8v-image"
)

// ClaimName is the claim of the image obj of kind short: "vi-<name>-<uid>".
func ClaimName(short string, obj client.Object) string {
	return kubename.Join(short, obj.GetName(), string(obj.GetUID()))
}

// FillerName is the filler Pod's (and its Secret's) name of the image key of kind short.
func FillerName(short string, key client.ObjectKey) string {
	return kubename.Join(short, "filler", key.Name)
}

// ownedMeta is the ObjectMeta of an object of img in its own namespace named name: labelled as
// its importer (the Pod watch and the cache find it) and owned by img.
func (c PodConfig) ownedMeta(k Kind, img Image, name, what string) metav1.ObjectMeta {
	m := c.meta(k, img)
	obj := img.Object
	m.Name, m.Namespace = name, obj.GetNamespace()
	m.Labels["app.kubernetes.io/name"] = what
	m.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: k.Name(), Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true),
	}}
	return m
}

// Claim is the one builder of the claim that keeps img: size bytes (its unpacked size) in class.
func (c PodConfig) Claim(k Kind, img Image, class storageclass.Choice, size int64) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: c.ownedMeta(k, img, ClaimName(k.Short(), img.Object), "image"),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{class.AccessMode},
			StorageClassName: ptr.To(class.Name),
			VolumeMode:       ptr.To(class.VolumeMode),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: storageclass.ClaimRequest(size),
			}},
		},
	}
}

// FillerExporterName names the DVCR exporter of img's filler, in the module's namespace (so after
// the image's UID).
func FillerExporterName(short string, img Image) string {
	return kubename.Join(short, "fill-export", string(img.Object.GetUID()))
}

// FillerExportFor is whom the filler's exporter serves: img, as its importer Pods in the module's
// namespace are labelled and annotated, so the Pod watch finds the image.
func (c PodConfig) FillerExportFor(k Kind, img Image) importerpod.ExportFor {
	m := c.meta(k, img)
	return importerpod.ExportFor{Labels: m.Labels, Annotations: m.Annotations, UIDLabel: LabelImageUID}
}

// FillerSecret holds the token of the exporter img's filler reads the image from.
func (c PodConfig) FillerSecret(k Kind, img Image, token []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: c.ownedMeta(k, img, FillerName(k.Short(), client.ObjectKeyFromObject(img.Object)), "filler"),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{importerpod.KeyExportToken: token},
	}
}

// FillerPod is the one builder of img's filler: the importer copying img's disk from its DVCR
// exporter (at url) into claim, a disk.img of size bytes or the Block device.
func (c PodConfig) FillerPod(k Kind, img Image, url string, claim *corev1.PersistentVolumeClaim, size int64) *corev1.Pod {
	m := c.ownedMeta(k, img, FillerName(k.Short(), client.ObjectKeyFromObject(img.Object)), "filler")
	container := importerpod.Container(c.Image, c.Log)
	container.Args = append(container.Args,
		importerpod.Flag(contract.FlagSourceURL, url),
		importerpod.Flag(contract.FlagSourceTokenFile, path.Join(sourceDir, importerpod.KeyExportToken)),
		importerpod.Flag(contract.FlagScratchDir, scratchDir),
		importerpod.Flag(contract.FlagMetricsAddress, ":"+strconv.Itoa(importerpod.MetricsPort)),
	)
	container.VolumeMounts = []corev1.VolumeMount{
		{Name: "source", MountPath: sourceDir, ReadOnly: true},
		{Name: "scratch", MountPath: scratchDir},
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		container.VolumeDevices = []corev1.VolumeDevice{{Name: "image", DevicePath: fillerDevice}}
		container.Args = append(container.Args, importerpod.Flag(contract.FlagDestinationFile, fillerDevice))
	} else {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "image", MountPath: fillerDataDir})
		container.Args = append(container.Args, importerpod.Flag(contract.FlagDestinationFile, path.Join(fillerDataDir, "disk.img")),
			importerpod.Flag(contract.FlagCapacity, strconv.FormatInt(size, 10)))
	}
	volumes := []corev1.Volume{
		{Name: "source", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: m.Name}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "image", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}},
	}
	return &corev1.Pod{ObjectMeta: m, Spec: importerpod.Spec(container, volumes)}
}
