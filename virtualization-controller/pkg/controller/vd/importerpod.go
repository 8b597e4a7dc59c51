package vd

import (
	"path"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
	"github.com/d8virt/virtualization-controller/pkg/kubename"
)

// PodConfig is what every disk importer Pod shares.
type PodConfig struct {
	// Image is the importer's image.
	Image string
	// Log is how importers log (the controller's own --log-level and --log-format).
	Log logopts.Options
	// UploadTimeout is how long an Upload source's uploader waits for the upload to begin;
	// UploadServiceType the type of its Service (NodePort: an external URL too).
	UploadTimeout     time.Duration
	UploadServiceType corev1.ServiceType
}

const (
	diskDir = "/data"
	// DevicePath is where a Block claim appears in the importer's container.
	DevicePath = "/dev/d8v-disk"
	// A source disk's claim: a Filesystem one mounted read-only at sourceDiskDir, a Block one at
	// sourceDevicePath.
	sourceDiskDir    = "/source"
	sourceDevicePath = "/dev/d8v-source"
	secretDir        = "/etc/importer/source"
	pullDir          = "/etc/importer/pull"
	scratchDir       = "/scratch"
	keyCA            = "ca.crt"
	// keyUploadToken holds an Upload source's token (the disk's AnnotationUploadToken); a
	// stager's export takes the same one (importerpod.KeyExportToken).
	keyUploadToken = "upload-token"
	// StagedExportPort is where a stager serves the staged upload (its upload port is
	// importerpod.UploadPort).
	StagedExportPort = 8091
	stagerName       = "stager"
	// labelUploader marks the Pod an Upload source's Service sends the upload to (the importer
	// of a sized disk, or the stager of one without a size).
	labelUploader = "virtualization.deckhouse.io/vd-uploader"
)

// ImporterName names a disk's importer Pod and its Secret.
func ImporterName(vd *v1alpha2.VirtualDisk) string { return kubename.Join("vd-importer", vd.Name) }

// InspectorName names the Pod that learns the size of a disk's source (InspectorPod).
func InspectorName(vd *v1alpha2.VirtualDisk) string { return kubename.Join("vd-inspector", vd.Name) }

// UploaderName names the Service in front of a disk's uploader (an Upload source's importer).
func UploaderName(vd *v1alpha2.VirtualDisk) string { return kubename.Join("vd-upload", vd.Name) }

// ExporterName names the DVCR exporter of a disk made from an image in DVCR, in the module's
// namespace (so after the disk's UID).
func ExporterName(vd *v1alpha2.VirtualDisk) string { return kubename.Join("vd-export", string(vd.UID)) }

// ImporterSecret holds the files the importer reads its source with that are not the user's
// own Secret: the source's CA bundle, for an image in DVCR its exporter's token, for an upload
// its token. It is nil when the source needs none.
func ImporterSecret(vd *v1alpha2.VirtualDisk, src *Source) *corev1.Secret {
	data := map[string][]byte{}
	switch {
	case src.Upload:
		token := []byte(vd.Annotations[importerpod.AnnotationUploadToken])
		data[keyUploadToken], data[importerpod.KeyExportToken] = token, token
	case src.ExportToken != nil:
		data[importerpod.KeyExportToken] = src.ExportToken
	case len(src.CABundle) > 0:
		data[keyCA] = src.CABundle
	default:
		return nil
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: ImporterName(vd), Namespace: vd.Namespace, Labels: labels(vd), OwnerReferences: owner(vd)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// ImporterPod is the one builder of a disk's importer Pod: it fills claim (of plan's volume
// mode) from plan's source. secret is ImporterSecret's, nil when there is none.
func (c PodConfig) ImporterPod(vd *v1alpha2.VirtualDisk, claim string, plan Plan, secret *corev1.Secret) *corev1.Pod {
	container := c.container()
	volumes := []corev1.Volume{
		{Name: "disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if plan.VolumeMode == corev1.PersistentVolumeBlock {
		container.VolumeDevices = []corev1.VolumeDevice{{Name: "disk", DevicePath: DevicePath}}
		// The device's size is the limit.
		container.Args = append(container.Args, importerpod.Flag(contract.FlagDestinationFile, DevicePath))
	} else {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "disk", MountPath: diskDir})
		container.Args = append(container.Args, importerpod.Flag(contract.FlagDestinationFile, path.Join(diskDir, "disk.img")),
			importerpod.Flag(contract.FlagCapacity, strconv.FormatInt(plan.Size.Value(), 10)))
	}
	volumes = c.addSource(&container, volumes, plan.Source, secret)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: ImporterName(vd), Namespace: vd.Namespace, Labels: importerLabels(vd, plan.Source), OwnerReferences: owner(vd)},
		Spec:       importerpod.Spec(container, volumes),
	}
}

// InspectorPod is the one builder of the Pod that learns the unpacked size of src for a disk
// without a size (no claim yet): for a URL or an image, the importer with --inspect; for an
// upload, a stager: the uploader staging the upload in its scratch space, then serving it at
// StagedExportPort with the upload's token (--then-export) to the importer of the claim made of
// the size it found. secret is ImporterSecret's, nil when there is none.
func (c PodConfig) InspectorPod(vd *v1alpha2.VirtualDisk, src *Source, secret *corev1.Secret) *corev1.Pod {
	container := c.container()
	l := labels(vd)
	l[labelName] = "inspector"
	if src.Upload {
		l[labelName], l[labelUploader] = stagerName, "true"
		container.Args = append(container.Args,
			importerpod.Flag(contract.FlagDestinationFile, path.Join(scratchDir, "disk.img")),
			importerpod.Flag(contract.FlagThenExport, "true"),
			importerpod.Flag(contract.FlagExportAddress, ":"+strconv.Itoa(StagedExportPort)),
			importerpod.Flag(contract.FlagExportTokenFile, path.Join(secretDir, importerpod.KeyExportToken)))
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: "export", ContainerPort: StagedExportPort, Protocol: corev1.ProtocolTCP})
	} else {
		container.Args = append(container.Args, importerpod.Flag(contract.FlagInspect, "true"))
	}
	volumes := []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	volumes = c.addSource(&container, volumes, src, secret)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: InspectorName(vd), Namespace: vd.Namespace, Labels: l, OwnerReferences: owner(vd)},
		Spec:       importerpod.Spec(container, volumes),
	}
}

// container is the importer container with its scratch space, without a source or destination.
func (c PodConfig) container() corev1.Container {
	container := importerpod.Container(c.Image, c.Log)
	container.VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: scratchDir}}
	container.Args = append(container.Args,
		importerpod.Flag(contract.FlagScratchDir, scratchDir),
		importerpod.Flag(contract.FlagMetricsAddress, ":"+strconv.Itoa(importerpod.MetricsPort)))
	return container
}

// addSource gives container the flags, mounts and port of src, and returns volumes with what
// they mount.
func (c PodConfig) addSource(container *corev1.Container, volumes []corev1.Volume, src *Source, secret *corev1.Secret) []corev1.Volume {
	switch {
	case src.Upload:
		container.Args = append(container.Args, importerpod.UploadArgs(path.Join(secretDir, keyUploadToken), c.UploadTimeout)...)
		container.Ports = append(container.Ports, importerpod.UploadContainerPort())
	case src.URL != "":
		container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceURL, src.URL))
		if src.ExportToken != nil {
			container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceTokenFile, path.Join(secretDir, importerpod.KeyExportToken)))
		}
	case src.Disk != nil:
		file := path.Join(sourceDiskDir, "disk.img")
		if src.Disk.Block {
			file = sourceDevicePath
			container.VolumeDevices = append(container.VolumeDevices, corev1.VolumeDevice{Name: "source-disk", DevicePath: sourceDevicePath})
		} else {
			container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "source-disk", MountPath: sourceDiskDir, ReadOnly: true})
		}
		volumes = append(volumes, corev1.Volume{Name: "source-disk", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: src.Disk.Claim, ReadOnly: !src.Disk.Block,
		}}})
		container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceFile, file))
	default:
		container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceImage, src.Image))
	}
	if cs := src.Checksum; cs != nil {
		for _, kv := range [][2]string{{contract.FlagMD5, cs.MD5}, {contract.FlagSHA1, cs.SHA1}, {contract.FlagSHA256, cs.SHA256}, {contract.FlagSHA512, cs.SHA512}} {
			if kv[1] != "" {
				container.Args = append(container.Args, importerpod.Flag(kv[0], kv[1]))
			}
		}
	}
	if secret != nil {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "source", MountPath: secretDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}})
		if _, ok := secret.Data[keyCA]; ok {
			container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceCABundle, path.Join(secretDir, keyCA)))
		}
		if _, ok := secret.Data[corev1.DockerConfigJsonKey]; ok {
			container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceAuthFile, path.Join(secretDir, corev1.DockerConfigJsonKey)))
		}
	}
	if src.PullSecret != "" {
		container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: "pull", MountPath: pullDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "pull", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: src.PullSecret, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: corev1.DockerConfigJsonKey}},
		}}})
		container.Args = append(container.Args, importerpod.Flag(contract.FlagSourceAuthFile, path.Join(pullDir, corev1.DockerConfigJsonKey)))
	}
	return volumes
}

func importerLabels(vd *v1alpha2.VirtualDisk, src *Source) map[string]string {
	l := labels(vd)
	l[labelName] = "importer"
	if src != nil && src.Upload {
		l[labelUploader] = "true"
	}
	return l
}

// StagedExportURL is where a running stager serves the staged upload.
func StagedExportURL(stager *corev1.Pod) string {
	return "http://" + stager.Status.PodIP + ":" + strconv.Itoa(StagedExportPort) + contract.ExportPath
}

// labelName says what a Pod of the controller's is.
const labelName = "app.kubernetes.io/name"

// UploaderService is the Service in front of the disk's uploader: the disk's upload URL.
func (c PodConfig) UploaderService(vd *v1alpha2.VirtualDisk) *corev1.Service {
	return importerpod.UploaderService(
		metav1.ObjectMeta{Name: UploaderName(vd), Namespace: vd.Namespace, Labels: labels(vd), OwnerReferences: owner(vd)},
		map[string]string{LabelVDUID: string(vd.UID), labelUploader: "true"}, c.UploadServiceType)
}

// UploadURLs are where the user uploads the disk (status.imageUploadURLs): its Service's
// in-cluster address, and its node port at the uploader's node for a NodePort Service (svc, nil
// when not read).
func UploadURLs(vd *v1alpha2.VirtualDisk, svc *corev1.Service, uploader *corev1.Pod) *v1alpha2.ImageUploadURLs {
	return importerpod.UploadURLs(UploaderName(vd), vd.Namespace, svc, uploader)
}
