// Package vi is the VirtualImage kind of package image: what differs from a
// ClusterVirtualImage (a namespace, sources in that namespace, status.target) and nothing else.
package vi

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
)

// EventSource is the controller's name in the events it records.
const EventSource = "virtualimage-controller"

// Kind is VirtualImage for image.Reconciler.
type Kind struct{}

var _ image.Kind = Kind{}

func (Kind) Name() string               { return v1alpha2.VirtualImageKind }
func (Kind) Short() string              { return image.ShortVI }
func (Kind) Namespaced() bool           { return true }
func (Kind) NewObject() client.Object   { return &v1alpha2.VirtualImage{} }
func (Kind) NewList() client.ObjectList { return &v1alpha2.VirtualImageList{} }
func (Kind) Storage(o client.Object) v1alpha2.ImageStorage {
	return o.(*v1alpha2.VirtualImage).Spec.Storage
}

func (Kind) StorageClass(o client.Object) *string {
	if pvc := o.(*v1alpha2.VirtualImage).Spec.PersistentVolumeClaim; pvc != nil {
		return pvc.StorageClassName
	}
	return nil
}

func (Kind) Status(o client.Object) image.Status {
	s := o.(*v1alpha2.VirtualImage).Status
	return image.Status{ImageStatus: s.ImageStatus, RegistryURL: s.Target.RegistryURL,
		ClaimName: s.Target.PersistentVolumeClaimName, StorageClassName: s.StorageClassName}
}

func (Kind) SetStatus(o client.Object, s image.Status) {
	v := o.(*v1alpha2.VirtualImage)
	v.Status.ImageStatus, v.Status.Target.RegistryURL = s.ImageStatus, s.RegistryURL
	v.Status.Target.PersistentVolumeClaimName, v.Status.StorageClassName = s.ClaimName, s.StorageClassName
}

// Source: a VirtualImage reads its pull secret and its source objects (but a cluster image)
// from its own namespace.
func (Kind) Source(o client.Object) image.Source {
	v := o.(*v1alpha2.VirtualImage)
	ds := v.Spec.DataSource
	src := image.Source{Type: ds.Type, HTTP: ds.HTTP, ContainerImage: ds.ContainerImage}
	if ci := ds.ContainerImage; ci != nil && ci.ImagePullSecret != nil {
		src.PullSecret = &types.NamespacedName{Namespace: v.Namespace, Name: ci.ImagePullSecret.Name}
	}
	if r := ds.ObjectRef; r != nil {
		src.Ref = &image.ObjectRef{Kind: r.Kind, NamespacedName: types.NamespacedName{Namespace: v.Namespace, Name: r.Name}}
		if r.Kind == v1alpha2.ClusterVirtualImageKind {
			src.Ref.Namespace = ""
		}
	}
	return src
}
