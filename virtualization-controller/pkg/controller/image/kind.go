// Package image imports ClusterVirtualImages and VirtualImages into DVCR: one set of pure
// decisions (Decide, CheckSource), status builders and one importer-Pod builder, carried out by
// one Reconciler. What differs between the two kinds (their Go types, where the source and the
// status live, the DVCR repository) is a Kind, implemented by the packages cvi and vi.
//
// An importer Pod runs in the module's namespace; its metrics feed status.progress while it runs
// and its termination message the final status.
package image

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// Kind is what the Reconciler needs to know of one image kind.
type Kind interface {
	// Name is the Kind's name, e.g. ClusterVirtualImage.
	Name() string
	// Short is its short name, e.g. cvi: the first part of its DVCR repositories and of its
	// importer Pods' names.
	Short() string
	// Namespaced is true for a kind whose objects live in a namespace.
	Namespaced() bool
	// NewObject and NewList are empty objects of the kind, for reads.
	NewObject() client.Object
	NewList() client.ObjectList
	// Source is obj's data source, with the namespaces it leaves implicit made explicit.
	Source(obj client.Object) Source
	// Storage is where obj is kept (a ClusterVirtualImage always in DVCR); StorageClass is the
	// class of a claim that keeps it (nil: the cluster's default).
	Storage(obj client.Object) v1alpha2.ImageStorage
	StorageClass(obj client.Object) *string
	// Status is obj's status; SetStatus writes it into obj.
	Status(obj client.Object) Status
	SetStatus(obj client.Object, s Status)
}

// Status is the part of a status this package writes: the status both kinds share, the
// registry URL of status.target, and for an image kept on a claim the claim and its class.
type Status struct {
	v1alpha2.ImageStatus
	RegistryURL      string
	ClaimName        string
	StorageClassName string
}

// Source is an image's data source. Exactly one of HTTP, ContainerImage and Ref is set for its
// Type (the CRDs' rules see to it); none for Upload.
type Source struct {
	Type           v1alpha2.DataSourceType
	HTTP           *v1alpha2.DataSourceHTTP
	ContainerImage *v1alpha2.DataSourceContainerImage
	// PullSecret is the ContainerImage's imagePullSecret in its namespace (a VirtualImage's own).
	PullSecret *types.NamespacedName
	// Ref is the object of an ObjectRef source, with its namespace (empty for a
	// ClusterVirtualImage).
	Ref *ObjectRef
}

// ObjectRef names the image or disk an ObjectRef source copies.
type ObjectRef struct {
	// Kind is v1alpha2.ClusterVirtualImageKind, VirtualImageKind or VirtualDiskKind.
	Kind string
	types.NamespacedName
}

// Image is one object of a Kind, as the pure functions read it.
type Image struct {
	Object       client.Object
	Storage      v1alpha2.ImageStorage
	StorageClass *string
	Source       Source
	Status       Status
}

// View is obj of kind k as an Image.
func View(k Kind, obj client.Object) Image {
	return Image{Object: obj, Storage: k.Storage(obj), StorageClass: k.StorageClass(obj), Source: k.Source(obj), Status: k.Status(obj)}
}

// Repository is the DVCR repository of the image of kind short ("cvi" or "vi") named key:
// cvi/<name> or vi/<namespace>/<name>.
func Repository(short string, key types.NamespacedName) string {
	if key.Namespace == "" {
		return short + "/" + key.Name
	}
	return short + "/" + key.Namespace + "/" + key.Name
}
