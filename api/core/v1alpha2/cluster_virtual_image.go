package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterVirtualImage is a disk image for the whole cluster, stored in the module's registry (DVCR): VirtualDisks of every namespace can be made from it and virtual machines can boot from it. Its spec is immutable.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName={cvi,cvis},categories={virtualization,virtualization-cluster}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="CDROM",type="boolean",JSONPath=".status.cdrom"
// +kubebuilder:printcolumn:name="Progress",type="string",JSONPath=".status.progress"
// +kubebuilder:printcolumn:name="StoredSize",type="string",JSONPath=".status.size.stored",priority=1
// +kubebuilder:printcolumn:name="UnpackedSize",type="string",JSONPath=".status.size.unpacked",priority=1
// +kubebuilder:printcolumn:name="Registry URL",type="string",JSONPath=".status.target.registryURL",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ClusterVirtualImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a ClusterVirtualImage's spec cannot change after creation"
	Spec ClusterVirtualImageSpec `json:"spec"`
	// +optional
	Status ClusterVirtualImageStatus `json:"status,omitempty"`
}

// ClusterVirtualImageList is a list of ClusterVirtualImages.
//
// +kubebuilder:object:root=true
type ClusterVirtualImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterVirtualImages.
	Items []ClusterVirtualImage `json:"items"`
}

// ClusterVirtualImageSpec is the desired cluster image.
type ClusterVirtualImageSpec struct {
	// DataSource is where the image's data comes from.
	DataSource ClusterVirtualImageDataSource `json:"dataSource"`
}

// ClusterVirtualImageDataSource is the source of a cluster image's data: `type` and the one field of that type (none for Upload).
//
// +kubebuilder:validation:XValidation:rule="has(self.http) == (self.type == 'HTTP')",message="spec.dataSource.http must be set when, and only when, spec.dataSource.type is HTTP",fieldPath=".http"
// +kubebuilder:validation:XValidation:rule="has(self.containerImage) == (self.type == 'ContainerImage')",message="spec.dataSource.containerImage must be set when, and only when, spec.dataSource.type is ContainerImage",fieldPath=".containerImage"
// +kubebuilder:validation:XValidation:rule="has(self.objectRef) == (self.type == 'ObjectRef')",message="spec.dataSource.objectRef must be set when, and only when, spec.dataSource.type is ObjectRef",fieldPath=".objectRef"
// +kubebuilder:validation:XValidation:rule="!has(self.containerImage) || !has(self.containerImage.imagePullSecret) || has(self.containerImage.imagePullSecret.namespace)",message="spec.dataSource.containerImage.imagePullSecret.namespace is required for a ClusterVirtualImage",fieldPath=".containerImage.imagePullSecret.namespace"
type ClusterVirtualImageDataSource struct {
	// Type of the source: HTTP, ContainerImage, ObjectRef or Upload.
	Type DataSourceType `json:"type"`
	// HTTP is the file to download, for type HTTP.
	// +optional
	HTTP *DataSourceHTTP `json:"http,omitempty"`
	// ContainerImage is the registry image to pull, for type ContainerImage.
	// +optional
	ContainerImage *DataSourceContainerImage `json:"containerImage,omitempty"`
	// ObjectRef is the image or disk to copy, for type ObjectRef.
	// +optional
	ObjectRef *ClusterVirtualImageObjectRef `json:"objectRef,omitempty"`
}

// ClusterVirtualImageObjectRef names the image or disk a ClusterVirtualImage is made from.
//
// +kubebuilder:validation:XValidation:rule="(self.kind == 'ClusterVirtualImage') != has(self.namespace)",message="spec.dataSource.objectRef.namespace is required for a VirtualImage or VirtualDisk and not allowed for a ClusterVirtualImage",fieldPath=".namespace"
type ClusterVirtualImageObjectRef struct {
	// Kind of the source: ClusterVirtualImage, VirtualImage or VirtualDisk.
	// +kubebuilder:validation:Enum=ClusterVirtualImage;VirtualImage;VirtualDisk
	Kind string `json:"kind"`
	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of a VirtualImage or VirtualDisk source.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ClusterVirtualImageStatus is the observed state of a ClusterVirtualImage.
type ClusterVirtualImageStatus struct {
	ImageStatus `json:",inline"`
	// Target is where the image is stored.
	// +optional
	Target ClusterVirtualImageStatusTarget `json:"target,omitempty"`
	// UsedInNamespaces lists the namespaces whose disks or machines use the image.
	// +optional
	UsedInNamespaces []string `json:"usedInNamespaces,omitempty"`
}

// ClusterVirtualImageStatusTarget is where a ClusterVirtualImage is stored.
type ClusterVirtualImageStatusTarget struct {
	// RegistryURL is the image in the module's registry (DVCR).
	// +optional
	RegistryURL string `json:"registryURL,omitempty"`
}
