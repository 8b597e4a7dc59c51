package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// VirtualDisk is a disk of virtual machines: a PersistentVolumeClaim filled from a data source (an image, a URL, a registry or an upload), or blank when it has none.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vd,vds},categories={virtualization}
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".status.capacity"
// +kubebuilder:printcolumn:name="InUse",type="string",JSONPath=".status.conditions[?(@.type=='InUse')].status",priority=1
// +kubebuilder:printcolumn:name="Progress",type="string",JSONPath=".status.progress",priority=1
// +kubebuilder:printcolumn:name="StorageClass",type="string",JSONPath=".status.storageClassName",priority=1
// +kubebuilder:printcolumn:name="TargetPVC",type="string",JSONPath=".status.target.persistentVolumeClaimName",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type VirtualDisk struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualDiskSpec `json:"spec"`
	// +optional
	Status VirtualDiskStatus `json:"status,omitempty"`
}

// VirtualDiskList is a list of VirtualDisks.
//
// +kubebuilder:object:root=true
type VirtualDiskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualDisks.
	Items []VirtualDisk `json:"items"`
}

// VirtualDiskSpec is the desired disk. Only persistentVolumeClaim.size may change after creation, and only grow.
//
// +kubebuilder:validation:XValidation:rule="has(self.dataSource) ? has(oldSelf.dataSource) && self.dataSource == oldSelf.dataSource : !has(oldSelf.dataSource)",message="spec.dataSource is immutable",fieldPath=".dataSource"
// +kubebuilder:validation:XValidation:rule="has(self.persistentVolumeClaim) && has(self.persistentVolumeClaim.storageClassName) ? has(oldSelf.persistentVolumeClaim) && has(oldSelf.persistentVolumeClaim.storageClassName) && self.persistentVolumeClaim.storageClassName == oldSelf.persistentVolumeClaim.storageClassName : !has(oldSelf.persistentVolumeClaim) || !has(oldSelf.persistentVolumeClaim.storageClassName)",message="spec.persistentVolumeClaim.storageClassName is immutable",fieldPath=".persistentVolumeClaim.storageClassName"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.persistentVolumeClaim) || !has(oldSelf.persistentVolumeClaim.size) || has(self.persistentVolumeClaim) && has(self.persistentVolumeClaim.size) && quantity(string(self.persistentVolumeClaim.size)).compareTo(quantity(string(oldSelf.persistentVolumeClaim.size))) >= 0",message="spec.persistentVolumeClaim.size may only grow (and cannot be removed)",fieldPath=".persistentVolumeClaim.size"
type VirtualDiskSpec struct {
	// DataSource is where the disk's data comes from. Without it the disk is blank.
	// +optional
	DataSource *VirtualDiskDataSource `json:"dataSource,omitempty"`
	// PersistentVolumeClaim sets the volume that holds the disk.
	// +optional
	PersistentVolumeClaim VirtualDiskPersistentVolumeClaim `json:"persistentVolumeClaim,omitempty"`
}

// VirtualDiskDataSource is the source of a disk's data: `type` and the one field of that type (none for Upload).
//
// +kubebuilder:validation:XValidation:rule="has(self.http) == (self.type == 'HTTP')",message="spec.dataSource.http must be set when, and only when, spec.dataSource.type is HTTP",fieldPath=".http"
// +kubebuilder:validation:XValidation:rule="has(self.containerImage) == (self.type == 'ContainerImage')",message="spec.dataSource.containerImage must be set when, and only when, spec.dataSource.type is ContainerImage",fieldPath=".containerImage"
// +kubebuilder:validation:XValidation:rule="has(self.objectRef) == (self.type == 'ObjectRef')",message="spec.dataSource.objectRef must be set when, and only when, spec.dataSource.type is ObjectRef",fieldPath=".objectRef"
// +kubebuilder:validation:XValidation:rule="!has(self.containerImage) || !has(self.containerImage.imagePullSecret) || !has(self.containerImage.imagePullSecret.namespace)",message="spec.dataSource.containerImage.imagePullSecret.namespace is not allowed: the Secret must be in the disk's namespace",fieldPath=".containerImage.imagePullSecret.namespace"
type VirtualDiskDataSource struct {
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
	ObjectRef *VirtualDiskObjectRef `json:"objectRef,omitempty"`
}

// VirtualDiskObjectRef names the image a disk is made from.
type VirtualDiskObjectRef struct {
	// Kind of the source: ClusterVirtualImage, or a VirtualImage or VirtualDisk of the disk's namespace (a VirtualDisk is copied; no running virtual machine may have it mounted).
	// +kubebuilder:validation:Enum=ClusterVirtualImage;VirtualImage;VirtualDisk
	Kind string `json:"kind"`
	// Name of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// VirtualDiskPersistentVolumeClaim sets the PersistentVolumeClaim that holds a disk.
type VirtualDiskPersistentVolumeClaim struct {
	// StorageClassName is the StorageClass of the volume; the cluster's default StorageClass when empty. Immutable.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
	// Size of the disk, for example `10Gi`. It defaults to the unpacked size of the source image, is required for a blank disk, and may be increased later (never decreased) to grow the disk.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}

// DiskPhase is the lifecycle phase of a VirtualDisk.
// +kubebuilder:validation:Enum=Pending;Provisioning;WaitForUserUpload;WaitForFirstConsumer;Ready;Resizing;Failed;PVCLost;Terminating
type DiskPhase string

// The disk phases.
const (
	// DiskPending: the disk waits for its source or for resources to start.
	DiskPending DiskPhase = "Pending"
	// DiskProvisioning: the volume is being created and filled.
	DiskProvisioning DiskPhase = "Provisioning"
	// DiskWaitForUserUpload: the disk waits for the user to upload the data.
	DiskWaitForUserUpload DiskPhase = "WaitForUserUpload"
	// DiskWaitForFirstConsumer: the StorageClass binds volumes only when a virtual machine that uses the disk is scheduled.
	DiskWaitForFirstConsumer DiskPhase = "WaitForFirstConsumer"
	// DiskReady: the disk can be used.
	DiskReady DiskPhase = "Ready"
	// DiskResizing: the volume is growing to spec.persistentVolumeClaim.size.
	DiskResizing DiskPhase = "Resizing"
	// DiskFailed: provisioning failed; the Ready condition says why.
	DiskFailed DiskPhase = "Failed"
	// DiskLost: the disk's PersistentVolumeClaim is gone.
	DiskLost DiskPhase = "PVCLost"
	// DiskTerminating: the disk is being deleted.
	DiskTerminating DiskPhase = "Terminating"
)

// VirtualDiskStatus is the observed state of a disk.
type VirtualDiskStatus struct {
	// Phase of the disk: Pending, Provisioning, WaitForUserUpload, WaitForFirstConsumer, Ready, Resizing, Failed, PVCLost or Terminating.
	// +optional
	Phase DiskPhase `json:"phase,omitempty"`
	// Progress of the import, in percent (for example `45.2%`).
	// +optional
	Progress string `json:"progress,omitempty"`
	// DownloadSpeed of the running import.
	// +optional
	DownloadSpeed *StatusSpeed `json:"downloadSpeed,omitempty"`
	// Capacity of the volume as its PersistentVolumeClaim reports it.
	// +optional
	Capacity string `json:"capacity,omitempty"`
	// Target is the volume that holds the disk.
	// +optional
	Target DiskTarget `json:"target,omitempty"`
	// ImageUploadURLs are where an Upload source accepts the data.
	// +optional
	ImageUploadURLs *ImageUploadURLs `json:"imageUploadURLs,omitempty"`
	// AttachedToVirtualMachines lists the virtual machines that use the disk.
	// +optional
	AttachedToVirtualMachines []AttachedVirtualMachine `json:"attachedToVirtualMachines,omitempty"`
	// Stats are durations of the disk's provisioning.
	// +optional
	Stats VirtualDiskStats `json:"stats,omitempty"`
	// SourceUID is the UID of the object the disk was made from, for an ObjectRef source.
	// +optional
	SourceUID *types.UID `json:"sourceUID,omitempty"`
	// StorageClassName is the StorageClass the volume was created with.
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
	// Conditions: DatasourceReady, Ready, Resizing, StorageClassReady, InUse and Terminating.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// DiskTarget is the volume that holds a disk.
type DiskTarget struct {
	// PersistentVolumeClaimName is the name of the disk's PersistentVolumeClaim, in the disk's namespace.
	// +optional
	PersistentVolumeClaimName string `json:"persistentVolumeClaimName,omitempty"`
}

// AttachedVirtualMachine is a virtual machine that uses a disk.
type AttachedVirtualMachine struct {
	// Name of the VirtualMachine, in the disk's namespace.
	Name string `json:"name"`
	// Mounted is true while the running machine has the disk attached.
	// +optional
	Mounted bool `json:"mounted,omitempty"`
}

// VirtualDiskStats are durations of a disk's provisioning.
type VirtualDiskStats struct {
	// CreationDuration splits the time from creation to Ready.
	// +optional
	CreationDuration VirtualDiskStatsCreationDuration `json:"creationDuration,omitempty"`
}

// VirtualDiskStatsCreationDuration splits the time from a disk's creation to Ready.
type VirtualDiskStatsCreationDuration struct {
	// WaitingForDependencies is the time spent waiting for the source and the StorageClass.
	// +optional
	WaitingForDependencies *metav1.Duration `json:"waitingForDependencies,omitempty"`
	// DVCRProvisioning is the time spent importing into the module's registry (DVCR), for sources imported there first.
	// +optional
	DVCRProvisioning *metav1.Duration `json:"dvcrProvisioning,omitempty"`
	// TotalProvisioning is the time from the start of the import to Ready.
	// +optional
	TotalProvisioning *metav1.Duration `json:"totalProvisioning,omitempty"`
}
