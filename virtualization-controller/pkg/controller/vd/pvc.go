package vd

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/kubename"
	"github.com/d8virt/virtualization-controller/pkg/storageclass"
)

const (
	// LabelVDUID marks the claim, importer Pod and Secret of a disk with its UID.
	LabelVDUID = "virtualization.deckhouse.io/vd-uid"
	// LabelManagedBy with ManagedBy marks what the controller creates (its caches see only those).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "virtualization-controller"
	// AnnotationDiskSize on the claim is the disk's size in bytes, as planned.
	AnnotationDiskSize = "virtualization.deckhouse.io/vd-size"
)

// ClaimName is the disk's claim: vd-<name>-<uid>, so a disk made again under the same name
// never meets its predecessor's claim.
func ClaimName(vd *v1alpha2.VirtualDisk) string { return kubename.Join("vd", vd.Name, string(vd.UID)) }

// Claim is the one builder of a disk's claim. A blank disk's claim is provisioned as it is;
// an imported one when the import completes.
func Claim(vd *v1alpha2.VirtualDisk, plan Plan) *corev1.PersistentVolumeClaim {
	annotations := map[string]string{AnnotationDiskSize: plan.Size.String()}
	if plan.Source == nil {
		annotations[AnnotationProvisioned] = "true"
	}
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ClaimName(vd),
			Namespace:       vd.Namespace,
			Labels:          labels(vd),
			Annotations:     annotations,
			OwnerReferences: owner(vd),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{plan.AccessMode},
			StorageClassName: ptr.To(plan.StorageClass),
			VolumeMode:       ptr.To(plan.VolumeMode),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: storageclass.ClaimRequest(plan.Size.Value()),
			}},
		},
	}
}

func labels(vd *v1alpha2.VirtualDisk) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelVDUID: string(vd.UID)}
}

func owner(vd *v1alpha2.VirtualDisk) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: v1alpha2.SchemeGroupVersion.String(),
		Kind:       v1alpha2.VirtualDiskKind,
		Name:       vd.Name,
		UID:        vd.UID,
		Controller: ptr.To(true),
	}}
}
