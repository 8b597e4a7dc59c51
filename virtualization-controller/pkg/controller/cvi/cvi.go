// Package cvi is the ClusterVirtualImage kind of package image: what differs from a
// VirtualImage (cluster scope, the source's explicit namespaces, status.target) and nothing else.
package cvi

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/controller/image"
)

// EventSource is the controller's name in the events it records.
const EventSource = "clustervirtualimage-controller"

// Kind is ClusterVirtualImage for image.Reconciler.
type Kind struct{}

var _ image.Kind = Kind{}

func (Kind) Name() string               { return v1alpha2.ClusterVirtualImageKind }
func (Kind) Short() string              { return image.ShortCVI }
func (Kind) Namespaced() bool           { return false }
func (Kind) NewObject() client.Object   { return &v1alpha2.ClusterVirtualImage{} }
func (Kind) NewList() client.ObjectList { return &v1alpha2.ClusterVirtualImageList{} }
func (Kind) Storage(client.Object) v1alpha2.ImageStorage {
	return v1alpha2.StorageContainerRegistry
}
func (Kind) StorageClass(client.Object) *string { return nil }

func (Kind) Status(o client.Object) image.Status {
	s := o.(*v1alpha2.ClusterVirtualImage).Status
	return image.Status{ImageStatus: s.ImageStatus, RegistryURL: s.Target.RegistryURL}
}

func (Kind) SetStatus(o client.Object, s image.Status) {
	c := o.(*v1alpha2.ClusterVirtualImage)
	c.Status.ImageStatus, c.Status.Target.RegistryURL = s.ImageStatus, s.RegistryURL
}

// Source: a cluster image names every namespace it reads from (the CRD's rules require them).
func (Kind) Source(o client.Object) image.Source {
	ds := o.(*v1alpha2.ClusterVirtualImage).Spec.DataSource
	src := image.Source{Type: ds.Type, HTTP: ds.HTTP, ContainerImage: ds.ContainerImage}
	if ci := ds.ContainerImage; ci != nil && ci.ImagePullSecret != nil {
		src.PullSecret = &types.NamespacedName{Namespace: ci.ImagePullSecret.Namespace, Name: ci.ImagePullSecret.Name}
	}
	if r := ds.ObjectRef; r != nil {
		src.Ref = &image.ObjectRef{Kind: r.Kind, NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: r.Name}}
	}
	return src
}
