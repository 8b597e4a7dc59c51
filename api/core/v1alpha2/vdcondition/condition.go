// Package vdcondition names the condition types and reasons of a VirtualDisk's status, as the
// reference module spells them.
package vdcondition

// Type is a condition type of a VirtualDisk.
type Type string

// The condition types.
const (
	// DatasourceReadyType: the source (an image, a URL, a registry image) is ready to be imported.
	DatasourceReadyType Type = "DatasourceReady"
	// ReadyType: the disk is provisioned and can be used.
	ReadyType Type = "Ready"
	// ResizingType: the volume is growing.
	ResizingType Type = "Resizing"
	// StorageClassReadyType: the StorageClass of the disk exists and can be used.
	StorageClassReadyType Type = "StorageClassReady"
	// InUseType: a virtual machine or an image creation uses the disk.
	InUseType Type = "InUse"
	// TerminatingType: the disk is being deleted; the reason says what the deletion waits for.
	TerminatingType Type = "Terminating"
)

// DatasourceReadyReason is a reason of the DatasourceReady condition.
type DatasourceReadyReason string

// The DatasourceReady reasons.
const (
	DatasourceReady                 DatasourceReadyReason = "DatasourceReady"
	ContainerRegistrySecretNotFound DatasourceReadyReason = "ContainerRegistrySecretNotFound"
	ImageNotReady                   DatasourceReadyReason = "ImageNotReady"
	ClusterImageNotReady            DatasourceReadyReason = "ClusterImageNotReady"
	ImageNotFound                   DatasourceReadyReason = "ImageNotFound"
	ClusterImageNotFound            DatasourceReadyReason = "ClusterImageNotFound"
	// VirtualDiskNotFound, VirtualDiskNotReady: the source VirtualDisk is not there, or not Ready.
	VirtualDiskNotFound DatasourceReadyReason = "VirtualDiskNotFound"
	VirtualDiskNotReady DatasourceReadyReason = "VirtualDiskNotReady"
	// VirtualDiskAttachedToRunningVM: a running virtual machine has the source VirtualDisk mounted; the copy starts once it stops.
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
	WaitingForFirstConsumer  ReadyReason = "WaitingForFirstConsumer"
	ProvisioningFailed       ReadyReason = "ProvisioningFailed"
	Ready                    ReadyReason = "Ready"
	Lost                     ReadyReason = "PVCLost"
	ImagePullFailed          ReadyReason = "ImagePullFailed"
	DatasourceIsNotReady     ReadyReason = "DatasourceIsNotReady"
	DatasourceIsNotFound     ReadyReason = "DatasourceIsNotFound"
	StorageClassIsNotReady   ReadyReason = "StorageClassIsNotReady"
)

// ResizingReason is a reason of the Resizing condition.
type ResizingReason string

// The Resizing reasons.
const (
	ResizingInProgress   ResizingReason = "InProgress"
	ResizingNotAvailable ResizingReason = "NotAvailable"
)

// StorageClassReadyReason is a reason of the StorageClassReady condition.
type StorageClassReadyReason string

// The StorageClassReady reasons.
const (
	StorageClassReady    StorageClassReadyReason = "StorageClassReady"
	StorageClassNotReady StorageClassReadyReason = "StorageClassNotReady"
)

// InUseReason is a reason of the InUse condition.
type InUseReason string

// The InUse reasons.
const (
	UsedForImageCreation     InUseReason = "UsedForImageCreation"
	AttachedToVirtualMachine InUseReason = "AttachedToVirtualMachine"
	NotInUse                 InUseReason = "NotInUse"
)

// TerminatingReason is a reason of the Terminating condition.
type TerminatingReason string

// The Terminating reasons.
const (
	// CleanupPending: the disk's auxiliary objects are still being deleted.
	CleanupPending TerminatingReason = "CleanupPending"
)
