package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualImage is a disk image of a namespace that VirtualDisks are made from and that virtual machines can boot from (as a read-only disk or a CD-ROM). It is stored in the module's registry (DVCR) or on a PersistentVolumeClaim. Its spec is immutable.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vi,vis},categories={virtualization}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="CDROM",type="boolean",JSONPath=".status.cdrom"
// +kubebuilder:printcolumn:name="Progress",type="string",JSONPath=".status.progress"
// +kubebuilder:printcolumn:name="StoredSize",type="string",JSONPath=".status.size.stored",priority=1
// +kubebuilder:printcolumn:name="UnpackedSize",type="string",JSONPath=".status.size.unpacked",priority=1
// +kubebuilder:printcolumn:name="Registry URL",type="string",JSONPath=".status.target.registryURL",priority=1
// +kubebuilder:printcolumn:name="TargetPVC",type="string",JSONPath=".status.target.persistentVolumeClaimName",priority=1
// +kubebuilder:printcolumn:name="StorageClass",type="string",JSONPath=".status.storageClassName",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a VirtualImage's spec cannot change after creation"
	Spec VirtualImageSpec `json:"spec"`
	// +optional
	Status VirtualImageStatus `json:"status,omitempty"`
}

// VirtualImageList is a list of VirtualImages.
//
// +kubebuilder:object:root=true
type VirtualImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualImages.
	Items []VirtualImage `json:"items"`
}

// ImageStorage is where a VirtualImage is stored.
// +kubebuilder:validation:Enum=ContainerRegistry;PersistentVolumeClaim
type ImageStorage string

// The image storages.
const (
	// StorageContainerRegistry stores the image in the module's registry (DVCR).
	StorageContainerRegistry ImageStorage = "ContainerRegistry"
	// StoragePersistentVolumeClaim stores the image on a PersistentVolumeClaim of the image's namespace.
	StoragePersistentVolumeClaim ImageStorage = "PersistentVolumeClaim"
)

// VirtualImageSpec is the desired image.
//
// +kubebuilder:validation:XValidation:rule="!has(self.persistentVolumeClaim) || self.storage == 'PersistentVolumeClaim'",message="spec.persistentVolumeClaim is only allowed when spec.storage is PersistentVolumeClaim",fieldPath=".persistentVolumeClaim"
type VirtualImageSpec struct {
	// Storage is where the image is kept: ContainerRegistry (the module's registry, DVCR) or PersistentVolumeClaim (a volume of the image's namespace).
	Storage ImageStorage `json:"storage"`
	// PersistentVolumeClaim sets the volume of an image with storage PersistentVolumeClaim.
	// +optional
	PersistentVolumeClaim *VirtualImagePersistentVolumeClaim `json:"persistentVolumeClaim,omitempty"`
	// DataSource is where the image's data comes from.
	DataSource VirtualImageDataSource `json:"dataSource"`
}

// VirtualImagePersistentVolumeClaim sets the volume of an image stored on a PersistentVolumeClaim.
type VirtualImagePersistentVolumeClaim struct {
	// StorageClassName is the StorageClass of the volume; the cluster's default StorageClass when empty.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// VirtualImageDataSource is the source of an image's data: `type` and the one field of that type (none for Upload).
//
// +kubebuilder:validation:XValidation:rule="has(self.http) == (self.type == 'HTTP')",message="spec.dataSource.http must be set when, and only when, spec.dataSource.type is HTTP",fieldPath=".http"
// +kubebuilder:validation:XValidation:rule="has(self.containerImage) == (self.type == 'ContainerImage')",message="spec.dataSource.containerImage must be set when, and only when, spec.dataSource.type is ContainerImage",fieldPath=".containerImage"
// +kubebuilder:validation:XValidation:rule="has(self.objectRef) == (self.type == 'ObjectRef')",message="spec.dataSource.objectRef must be set when, and only when, spec.dataSource.type is ObjectRef",fieldPath=".objectRef"
// +kubebuilder:validation:XValidation:rule="!has(self.containerImage) || !has(self.containerImage.imagePullSecret) || !has(self.containerImage.imagePullSecret.namespace)",message="spec.dataSource.containerImage.imagePullSecret.namespace is not allowed: the Secret must be in the image's namespace",fieldPath=".containerImage.imagePullSecret.namespace"
type VirtualImageDataSource struct {
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
	ObjectRef *VirtualImageObjectRef `json:"objectRef,omitempty"`
}

// VirtualImageObjectRef names the image or disk a VirtualImage is made from.
type VirtualImageObjectRef struct {
	// Kind of the source: ClusterVirtualImage, or a VirtualImage or VirtualDisk of the image's namespace.
	// +kubebuilder:validation:Enum=ClusterVirtualImage;VirtualImage;VirtualDisk
	Kind string `json:"kind"`
	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VirtualImageStatus is the observed state of a VirtualImage.
type VirtualImageStatus struct {
	ImageStatus `json:",inline"`
	// Target is where the image is stored.
	// +optional
	Target VirtualImageStatusTarget `json:"target,omitempty"`
	// StorageClassName is the StorageClass of the image's volume, for storage PersistentVolumeClaim.
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
}

// VirtualImageStatusTarget is where a VirtualImage is stored.
type VirtualImageStatusTarget struct {
	// RegistryURL is the image in the module's registry (DVCR), for storage ContainerRegistry.
	// +optional
	RegistryURL string `json:"registryURL,omitempty"`
	// PersistentVolumeClaimName is the image's volume, for storage PersistentVolumeClaim.
	// +optional
	PersistentVolumeClaimName string `json:"persistentVolumeClaimName,omitempty"`
}

// ImageStatus is the part of the status that VirtualImage and ClusterVirtualImage share.
type ImageStatus struct {
	// Phase of the image: Pending, WaitForUserUpload, Provisioning, Ready, Failed, ImageLost, PVCLost or Terminating.
	// +optional
	Phase ImagePhase `json:"phase,omitempty"`
	// Progress of the import, in percent (for example `45.2%`).
	// +optional
	Progress string `json:"progress,omitempty"`
	// DownloadSpeed of the running import.
	// +optional
	DownloadSpeed *StatusSpeed `json:"downloadSpeed,omitempty"`
	// Size of the imported image.
	// +optional
	Size ImageStatusSize `json:"size,omitempty"`
	// Format of the imported image, as qemu-img names it (qcow2, raw, iso ...).
	// +optional
	Format string `json:"format,omitempty"`
	// CDROM is true for an ISO image, which virtual machines attach as a CD-ROM.
	// +optional
	CDROM bool `json:"cdrom,omitempty"`
	// ImageUploadURLs are where an Upload source accepts the data.
	// +optional
	ImageUploadURLs *ImageUploadURLs `json:"imageUploadURLs,omitempty"`
	// SourceUID is the UID of the object the image was made from, for an ObjectRef source.
	// +optional
	SourceUID *types.UID `json:"sourceUID,omitempty"`
	// Conditions: DatasourceReady and Ready (and StorageClassReady for a VirtualImage).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
