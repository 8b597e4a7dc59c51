// Package storageclass reads what a volume the controller makes (a disk's, an image's) gets from
// its StorageClass: the class named, or the cluster's default, and the volume and access modes
// the class's annotations choose. It is pure.
package storageclass

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// AnnotationVolumeMode on a StorageClass chooses the volume mode of the volumes made in it: Block,
// or Filesystem (the default), whose volume holds the disk as disk.img.
const AnnotationVolumeMode = "virtualization.deckhouse.io/volume-mode"

// AnnotationAccessMode on a StorageClass chooses the access mode of the volumes made in it:
// ReadWriteOnce (the default), or ReadWriteMany for storage every node reaches, which a live
// migration needs (the claim is not copied: source and target use it at once).
const AnnotationAccessMode = "virtualization.deckhouse.io/access-mode"

// AnnotationDefault marks the cluster's default StorageClass.
const AnnotationDefault = "storageclass.kubernetes.io/is-default-class"

// Choice is what a volume gets from its class.
type Choice struct {
	Name       string
	VolumeMode corev1.PersistentVolumeMode
	AccessMode corev1.PersistentVolumeAccessMode
	// WaitForFirstConsumer: the class binds volumes where their first Pod is scheduled.
	WaitForFirstConsumer bool
}

// Error is why no class can be chosen. Missing: the class named, or a default one, does not
// exist (it may be created); else the class's annotations are wrong (the class must change).
type Error struct {
	Missing bool
	Message string
}

func (e *Error) Error() string { return e.Message }

// Choose is the class field names (name; nil or empty for the default one) among classes.
func Choose(field string, name *string, classes []storagev1.StorageClass) (Choice, error) {
	sc, err := pick(field, name, classes)
	if err != nil {
		return Choice{}, err
	}
	c := Choice{Name: sc.Name, WaitForFirstConsumer: sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer}
	mode, err := annotation(sc, AnnotationVolumeMode, string(corev1.PersistentVolumeFilesystem), string(corev1.PersistentVolumeBlock))
	if err != nil {
		return Choice{}, err
	}
	access, err := annotation(sc, AnnotationAccessMode, string(corev1.ReadWriteOnce), string(corev1.ReadWriteMany))
	if err != nil {
		return Choice{}, err
	}
	c.VolumeMode, c.AccessMode = corev1.PersistentVolumeMode(mode), corev1.PersistentVolumeAccessMode(access)
	return c, nil
}

func pick(field string, name *string, classes []storagev1.StorageClass) (*storagev1.StorageClass, error) {
	if name != nil && *name != "" {
		for i := range classes {
			if classes[i].Name == *name {
				return &classes[i], nil
			}
		}
		return nil, &Error{Missing: true, Message: fmt.Sprintf("%s: StorageClass %s not found", field, *name)}
	}
	var def *storagev1.StorageClass
	for i := range classes {
		if classes[i].Annotations[AnnotationDefault] == "true" {
			// Of several defaults, Kubernetes takes the newest; so does the controller.
			if def == nil || def.CreationTimestamp.Before(&classes[i].CreationTimestamp) {
				def = &classes[i]
			}
		}
	}
	if def == nil {
		return nil, &Error{Missing: true, Message: "the cluster has no default StorageClass: set " + field}
	}
	return def, nil
}

// annotation is the value of the class's annotation key, one of allowed; without the
// annotation the first of them.
func annotation(sc *storagev1.StorageClass, key string, allowed ...string) (string, error) {
	v, ok := sc.Annotations[key]
	if !ok || v == "" {
		return allowed[0], nil
	}
	if !slices.Contains(allowed, v) {
		return "", &Error{Message: fmt.Sprintf("StorageClass %s: annotation %s is %q: want %s", sc.Name, key, v, strings.Join(allowed, " or "))}
	}
	return v, nil
}

// ClaimRequest is what a claim must request to hold a disk (or an image) of size bytes, in whole MiB: the
// size itself, in either volume mode. A Block volume is the disk; a Filesystem volume holds
// disk.img of the claim's request, as KubeVirt sizes a claim's image (virt-launcher makes a
// missing one that large and grows a smaller one to it), in a file system that the storage
// makes large enough for it, or a little less (KubeVirt then takes what there is, within 10%).
func ClaimRequest(size int64) resource.Quantity {
	const mib = 1 << 20
	n := (size + mib - 1) / mib * mib
	return *resource.NewQuantity(n, resource.BinarySI)
}

// Claim is the one builder of a claim of the class for a disk of size bytes, with meta.
func (c Choice) Claim(meta metav1.ObjectMeta, size int64) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{c.AccessMode},
			StorageClassName: ptr.To(c.Name),
			VolumeMode:       ptr.To(c.VolumeMode),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: ClaimRequest(size),
			}},
		},
	}
}
