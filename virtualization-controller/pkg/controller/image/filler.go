package image

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/kubename"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

// An image kept on a claim (a VirtualImage with storage PersistentVolumeClaim) is imported into
// DVCR first, as any image (its size and format become known), then a filler, the importer in a
// Pod of the image's namespace, copies it into a claim there from a DVCR exporter in the
// module's namespace (importerpod.DVCRExporter), with that exporter's token only; the DVCR copy
// is deleted once the claim holds the image.

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
	return class.Claim(c.ownedMeta(k, img, ClaimName(k.Short(), img.Object), "image"), size)
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
	return importerpod.FillerSecret(c.ownedMeta(k, img, FillerName(k.Short(), client.ObjectKeyFromObject(img.Object)), "filler"), token)
}

// FillerPod is img's filler: the importer copying img's disk from its DVCR exporter (at url)
// into claim, a disk.img of size bytes or the Block device.
func (c PodConfig) FillerPod(k Kind, img Image, url string, claim *corev1.PersistentVolumeClaim, size int64) *corev1.Pod {
	m := c.ownedMeta(k, img, FillerName(k.Short(), client.ObjectKeyFromObject(img.Object)), "filler")
	return importerpod.FillerPod(c.Image, c.Log, m, url, claim, size)
}
