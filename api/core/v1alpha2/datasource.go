package v1alpha2

// DataSourceType names where the data of a disk or an image comes from.
// +kubebuilder:validation:Enum=HTTP;ContainerImage;ObjectRef;Upload
type DataSourceType string

// The data source types. Each type but Upload has its own payload field next to `type`.
const (
	// DataSourceTypeHTTP downloads the data from an HTTP or HTTPS URL (field `http`).
	DataSourceTypeHTTP DataSourceType = "HTTP"
	// DataSourceTypeContainerImage pulls a container disk image from a registry (field `containerImage`).
	DataSourceTypeContainerImage DataSourceType = "ContainerImage"
	// DataSourceTypeObjectRef copies another image or disk of the module (field `objectRef`).
	DataSourceTypeObjectRef DataSourceType = "ObjectRef"
	// DataSourceTypeUpload waits for the user to upload the data to status.imageUploadURLs.
	DataSourceTypeUpload DataSourceType = "Upload"
)

// The kinds an objectRef can name.
const (
	ClusterVirtualImageKind = "ClusterVirtualImage"
	VirtualImageKind        = "VirtualImage"
	VirtualDiskKind         = "VirtualDisk"
)

// DataSourceHTTP is a file to download over HTTP or HTTPS.
type DataSourceHTTP struct {
	// URL of the file, http:// or https://. The file may be a qcow2, raw, vmdk, vdi or ISO image, compressed with gzip or xz or not at all.
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// CABundle holds the PEM certificates that the HTTPS server's certificate must chain to, when it is not signed by a well-known authority.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
	// Checksum of the downloaded file (before decompression); the import fails when it differs.
	// +optional
	Checksum *Checksum `json:"checksum,omitempty"`
}

// Checksum holds one or more digests of a file, as lowercase hex strings. Every digest given must match.
// +kubebuilder:validation:MinProperties=1
type Checksum struct {
	// MD5 digest, 32 hex digits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{32}$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	MD5 string `json:"md5,omitempty"`
	// SHA1 digest, 40 hex digits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{40}$`
	// +kubebuilder:validation:MaxLength=40
	// +optional
	SHA1 string `json:"sha1,omitempty"`
	// SHA256 digest, 64 hex digits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// SHA512 digest, 128 hex digits.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{128}$`
	// +kubebuilder:validation:MaxLength=128
	// +optional
	SHA512 string `json:"sha512,omitempty"`
}

// DataSourceContainerImage is a container disk image in a registry: the disk file under /disk/ in the image, the layout of KubeVirt's containerDisk.
type DataSourceContainerImage struct {
	// Image reference, for example `registry.example.com/images/debian:12` or `registry.example.com/images/debian@sha256:...`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`
	// ImagePullSecret names a Secret of type kubernetes.io/dockerconfigjson with the credentials of the registry.
	// +optional
	ImagePullSecret *ImagePullSecret `json:"imagePullSecret,omitempty"`
	// CABundle holds the PEM certificates that the registry's certificate must chain to, when it is not signed by a well-known authority.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
}

// ImagePullSecret names the Secret with a registry's credentials.
type ImagePullSecret struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace of the Secret. Only a ClusterVirtualImage names it (and must); a VirtualImage or VirtualDisk uses a Secret of its own namespace.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// ImagePhase is the lifecycle phase of a VirtualImage or ClusterVirtualImage.
// +kubebuilder:validation:Enum=Pending;WaitForUserUpload;Provisioning;Ready;Failed;ImageLost;PVCLost;Terminating
type ImagePhase string

// The image phases.
const (
	// ImagePending: the image waits for its source or for resources to start the import.
	ImagePending ImagePhase = "Pending"
	// ImageWaitForUserUpload: the image waits for the user to upload the data.
	ImageWaitForUserUpload ImagePhase = "WaitForUserUpload"
	// ImageProvisioning: the data is being imported.
	ImageProvisioning ImagePhase = "Provisioning"
	// ImageReady: the image can be used.
	ImageReady ImagePhase = "Ready"
	// ImageFailed: the import failed; the Ready condition says why.
	ImageFailed ImagePhase = "Failed"
	// ImageLost: the image is gone from the registry (DVCR).
	ImageLost ImagePhase = "ImageLost"
	// ImagePVCLost: the PersistentVolumeClaim of a VirtualImage stored on a volume is gone.
	ImagePVCLost ImagePhase = "PVCLost"
	// ImageTerminating: the image is being deleted.
	ImageTerminating ImagePhase = "Terminating"
)

// StatusSpeed is the download speed of an import.
type StatusSpeed struct {
	// Avg is the average speed, human readable (for example `12.3Mi/s`).
	// +optional
	Avg string `json:"avg,omitempty"`
	// AvgBytes is the average speed in bytes per second.
	// +optional
	AvgBytes string `json:"avgBytes,omitempty"`
	// Current is the speed of the last measurement interval, human readable.
	// +optional
	Current string `json:"current,omitempty"`
	// CurrentBytes is the speed of the last measurement interval in bytes per second.
	// +optional
	CurrentBytes string `json:"currentBytes,omitempty"`
}

// ImageUploadURLs are where an Upload source accepts the data (for example with `curl -T disk.qcow2 URL`).
type ImageUploadURLs struct {
	// External is reachable from outside the cluster.
	// +optional
	External string `json:"external,omitempty"`
	// InCluster is reachable from Pods of the cluster.
	// +optional
	InCluster string `json:"inCluster,omitempty"`
}

// ImageStatusSize is the size of an imported image.
type ImageStatusSize struct {
	// Stored is the size the image takes in storage, human readable.
	// +optional
	Stored string `json:"stored,omitempty"`
	// StoredBytes is the size the image takes in storage, in bytes.
	// +optional
	StoredBytes string `json:"storedBytes,omitempty"`
	// Unpacked is the size of the disk the image holds (its virtual size), human readable.
	// +optional
	Unpacked string `json:"unpacked,omitempty"`
	// UnpackedBytes is the size of the disk the image holds (its virtual size), in bytes.
	// +optional
	UnpackedBytes string `json:"unpackedBytes,omitempty"`
}
