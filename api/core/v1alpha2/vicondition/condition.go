// Package vicondition names the condition types and reasons of a VirtualImage's status, as the
// reference module spells them.
package vicondition

// Type is a condition type of a VirtualImage.
type Type string

// The condition types.
const (
	// DatasourceReadyType: the source is ready to be imported.
	DatasourceReadyType Type = "DatasourceReady"
	// ReadyType: the image is imported and can be used.
	ReadyType Type = "Ready"
	// StorageClassReadyType: the StorageClass of an image stored on a volume can be used.
	StorageClassReadyType Type = "StorageClassReady"
)

// DatasourceReadyReason is a reason of the DatasourceReady condition.
type DatasourceReadyReason string

// The DatasourceReady reasons.
const (
	DatasourceReady                 DatasourceReadyReason = "DatasourceReady"
	ContainerRegistrySecretNotFound DatasourceReadyReason = "ContainerRegistrySecretNotFound"
	ImageNotReady                   DatasourceReadyReason = "ImageNotReady"
	ClusterImageNotReady            DatasourceReadyReason = "ClusterImageNotReady"
	VirtualDiskNotReady             DatasourceReadyReason = "VirtualDiskNotReady"
	// VirtualDiskAttachedToRunningVM: the source VirtualDisk is in use by a running virtual machine; the import starts once it stops.
	VirtualDiskAttachedToRunningVM DatasourceReadyReason = "VirtualDiskAttachedToRunningVM"
)

// ReadyReason is a reason of the Ready condition.
type ReadyReason string

// The Ready reasons.
const (
	WaitForUserUpload        ReadyReason = "WaitForUserUpload"
	WaitForUserUploadTimeout ReadyReason = "WaitForUserUploadTimeout"
	Provisioning             ReadyReason = "Provisioning"
	ProvisioningNotStarted   ReadyReason = "ProvisioningNotStarted"
	ProvisioningFailed       ReadyReason = "ProvisioningFailed"
	Ready                    ReadyReason = "Ready"
	Lost                     ReadyReason = "PVCLost"
	ImageLost                ReadyReason = "ImageLost"
)

// StorageClassReadyReason is a reason of the StorageClassReady condition.
type StorageClassReadyReason string

// The StorageClassReady reasons.
const (
	StorageClassReady           StorageClassReadyReason = "StorageClassReady"
	StorageClassNotFound        StorageClassReadyReason = "StorageClassNotFound"
	DVCRTypeUsed                StorageClassReadyReason = "DVCRTypeUsed"
	StorageClassNameNotProvided StorageClassReadyReason = "StorageClassNameNotProvided"
	// StorageClassNotReady: the image's StorageClass cannot be used as its annotations say.
	StorageClassNotReady StorageClassReadyReason = "StorageClassNotReady"
)
