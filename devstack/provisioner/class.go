package provisioner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultClassAnnotation marks the cluster's default StorageClass.
const DefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// StorageClass is the default class of the local stack: volumes are made when the first pod
// that uses the claim is scheduled (on its node), may grow, and are deleted with their claims.
func StorageClass(name string) *storagev1.StorageClass {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	del := corev1.PersistentVolumeReclaimDelete
	grow := true
	return &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name, Annotations: map[string]string{DefaultClassAnnotation: "true"}},
		Provisioner:          Name,
		ReclaimPolicy:        &del,
		VolumeBindingMode:    &wait,
		AllowVolumeExpansion: &grow,
	}
}

// EnsureStorageClass creates the class, or makes an existing one of this provisioner the default
// and expandable again (the other fields of a StorageClass cannot change).
func EnsureStorageClass(ctx context.Context, kube kubernetes.Interface, want *storagev1.StorageClass) error {
	api := kube.StorageV1().StorageClasses()
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err = api.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create storageclass %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get storageclass %s: %w", want.Name, err)
	}
	if got.Provisioner != want.Provisioner {
		return fmt.Errorf("storageclass %s belongs to provisioner %s, not %s", want.Name, got.Provisioner, want.Provisioner)
	}
	if got.Annotations[DefaultClassAnnotation] == "true" && got.AllowVolumeExpansion != nil && *got.AllowVolumeExpansion {
		return nil
	}
	got = got.DeepCopy()
	metav1.SetMetaDataAnnotation(&got.ObjectMeta, DefaultClassAnnotation, "true")
	got.AllowVolumeExpansion = want.AllowVolumeExpansion
	if _, err := api.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update storageclass %s: %w", want.Name, err)
	}
	return nil
}
