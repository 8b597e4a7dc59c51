package image

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerpod"
)

// PodConfig is what every importer Pod shares.
type PodConfig struct {
	Namespace string
	Image     string
	// Log is how importers log (the controller's own --log-level and --log-format).
	Log logopts.Options
	// DVCRAddress is DVCR's push address (host:port); DVCRPullAddress its read-only one.
	DVCRAddress     string
	DVCRPullAddress string
	// DVCRPusherSecret holds .dockerconfigjson, DVCRTLSSecret ca.crt: importer Pods mount them.
	DVCRPusherSecret string
	DVCRTLSSecret    string
	// UploadTimeout is how long an Upload source's importer waits for the upload to begin;
	// UploadServiceType the type of its Service (NodePort: an external URL too).
	UploadTimeout     time.Duration
	UploadServiceType corev1.ServiceType
}

const (
	// LabelImageKind marks an importer Pod (and its Secret) with its image's kind, short (cvi, vi).
	LabelImageKind = "virtualization.deckhouse.io/image-kind"
	// LabelImageUID marks them with the UID of their image.
	LabelImageUID = "virtualization.deckhouse.io/image-uid"
	// AnnotationImageName and AnnotationImageNamespace name their image (a name may be longer
	// than a label value).
	AnnotationImageName      = "virtualization.deckhouse.io/image-name"
	AnnotationImageNamespace = "virtualization.deckhouse.io/image-namespace"

	caDir      = "/etc/dvcr/tls"
	authDir    = "/etc/dvcr/auth"
	sourceDir  = "/etc/importer/source"
	scratchDir = "/scratch"
	// The keys of an import's own Secret (SourceSecret).
	keySourceCA    = "ca.crt"
	keyUploadToken = "upload-token"
)

// RegistryURL is where virtual machines pull the image in repo from (status.target.registryURL).
func (c PodConfig) RegistryURL(repo string) string {
	return c.DVCRPullAddress + "/" + repo + ":latest"
}

// PushRef is the image in repo at DVCR's push address, as importers push and read it.
func (c PodConfig) PushRef(repo string) string {
	return c.DVCRAddress + "/" + repo + ":latest"
}

// PodName is the importer Pod's name for the image key of kind short: "cvi-importer-<name>",
// or "vi-importer-<namespace>-<name>-<hash>" (the hash tells a-b/c from a/b-c), shortened with
// a hash when that would not be a valid Pod name (at most 253 characters). Its Secret has the
// same name.
func PodName(short string, key types.NamespacedName) string {
	n := short + "-importer-" + key.Name
	if key.Namespace != "" {
		n = short + "-importer-" + key.Namespace + "-" + key.Name + "-" + hash(key.String())[:8]
	}
	if len(n) <= 253 {
		return n
	}
	h := hash(key.String())[:10]
	return n[:253-len(h)-1] + "-" + h
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// meta is the ObjectMeta of img's importer Pod and Secret. Only a cluster-scoped image can own
// them (an owner must be cluster-scoped or in the same namespace); a VirtualImage's are found
// by their labels and annotations, and its finalizer sees them deleted.
func (c PodConfig) meta(k Kind, img Image) metav1.ObjectMeta {
	obj := img.Object
	m := metav1.ObjectMeta{
		Name:      PodName(k.Short(), client.ObjectKeyFromObject(obj)),
		Namespace: c.Namespace,
		Labels: map[string]string{
			"app.kubernetes.io/name":       "importer",
			"app.kubernetes.io/managed-by": "virtualization-controller",
			LabelImageKind:                 k.Short(),
			LabelImageUID:                  string(obj.GetUID()),
		},
		Annotations: map[string]string{AnnotationImageName: obj.GetName(), AnnotationImageNamespace: obj.GetNamespace()},
	}
	if !k.Namespaced() {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: k.Name(), Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true),
		}}
	}
	return m
}

// SourceSecret is the Secret img's importer mounts for its source: the source's CA bundle and
// a copy of the pull secret's .dockerconfigjson (l.PullSecret). Nil when the source needs none.
func (c PodConfig) SourceSecret(k Kind, img Image, l Lookup) *corev1.Secret {
	data := map[string][]byte{}
	src := img.Source
	switch {
	case src.HTTP != nil && len(src.HTTP.CABundle) > 0:
		data[keySourceCA] = src.HTTP.CABundle
	case src.Type == v1alpha2.DataSourceTypeUpload:
		data[keyUploadToken] = []byte(img.Object.GetAnnotations()[importerpod.AnnotationUploadToken])
	case len(l.ExportToken) > 0:
		data[importerpod.KeyExportToken] = l.ExportToken
	case src.ContainerImage != nil:
		if len(src.ContainerImage.CABundle) > 0 {
			data[keySourceCA] = src.ContainerImage.CABundle
		}
		if src.PullSecret != nil {
			data[corev1.DockerConfigJsonKey] = l.PullSecret
		}
	}
	if len(data) == 0 {
		return nil
	}
	return &corev1.Secret{ObjectMeta: c.meta(k, img), Type: corev1.SecretTypeOpaque, Data: data}
}

// sourceArgs are the importer's flags for img's source (CheckSource has passed).
func (c PodConfig) sourceArgs(img Image, l Lookup, secret *corev1.Secret) []string {
	src := img.Source
	var args []string
	switch {
	case src.HTTP != nil:
		args = append(args, importerpod.Flag(contract.FlagSourceURL, src.HTTP.URL))
		if cs := src.HTTP.Checksum; cs != nil {
			for _, kv := range [][2]string{{contract.FlagMD5, cs.MD5}, {contract.FlagSHA1, cs.SHA1}, {contract.FlagSHA256, cs.SHA256}, {contract.FlagSHA512, cs.SHA512}} {
				if kv[1] != "" {
					args = append(args, importerpod.Flag(kv[0], kv[1]))
				}
			}
		}
	case src.ContainerImage != nil:
		args = append(args, importerpod.Flag(contract.FlagSourceImage, src.ContainerImage.Image))
	case src.Type == v1alpha2.DataSourceTypeUpload:
		return append(args, importerpod.UploadArgs(path.Join(sourceDir, keyUploadToken), c.UploadTimeout)...)
	case l.ExportURL != "": // a VirtualDisk, from its exporter
		return append(args,
			importerpod.Flag(contract.FlagSourceURL, l.ExportURL),
			importerpod.Flag(contract.FlagSourceTokenFile, path.Join(sourceDir, importerpod.KeyExportToken)))
	case l.Ref != nil: // an image in DVCR, read with the importer's own DVCR credentials
		return append(args,
			importerpod.Flag(contract.FlagSourceImage, c.PushRef(l.Ref.Repository)),
			importerpod.Flag(contract.FlagSourceCABundle, path.Join(caDir, "ca.crt")),
			importerpod.Flag(contract.FlagSourceAuthFile, path.Join(authDir, corev1.DockerConfigJsonKey)))
	}
	if secret != nil {
		if _, ok := secret.Data[keySourceCA]; ok {
			args = append(args, importerpod.Flag(contract.FlagSourceCABundle, path.Join(sourceDir, keySourceCA)))
		}
		if _, ok := secret.Data[corev1.DockerConfigJsonKey]; ok {
			args = append(args, importerpod.Flag(contract.FlagSourceAuthFile, path.Join(sourceDir, corev1.DockerConfigJsonKey)))
		}
	}
	return args
}

// ImporterPod is the one builder of an image's importer Pod: img of kind k into DVCR at repo,
// from its source as l found it (CheckSource has passed), mounting secret (SourceSecret; nil
// when there is none).
func (c PodConfig) ImporterPod(k Kind, img Image, repo string, l Lookup, secret *corev1.Secret) *corev1.Pod {
	args := append(c.sourceArgs(img, l, secret),
		importerpod.Flag(contract.FlagDestinationImage, c.PushRef(repo)),
		importerpod.Flag(contract.FlagDestinationCABundle, path.Join(caDir, "ca.crt")),
		importerpod.Flag(contract.FlagDestinationAuthFile, path.Join(authDir, corev1.DockerConfigJsonKey)),
		importerpod.Flag(contract.FlagScratchDir, scratchDir),
		importerpod.Flag(contract.FlagMetricsAddress, ":"+strconv.Itoa(importerpod.MetricsPort)),
	)
	mounts := []corev1.VolumeMount{
		{Name: "dvcr-tls", MountPath: caDir, ReadOnly: true},
		{Name: "dvcr-auth", MountPath: authDir, ReadOnly: true},
		{Name: "scratch", MountPath: scratchDir},
	}
	volumes := []corev1.Volume{
		{Name: "dvcr-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: c.DVCRTLSSecret, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
		}}},
		{Name: "dvcr-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: c.DVCRPusherSecret, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: corev1.DockerConfigJsonKey}},
		}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if secret != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: "source", MountPath: sourceDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "source", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret.Name}}})
	}
	container := importerpod.Container(c.Image, c.Log)
	container.Args = append(container.Args, args...)
	if img.Source.Type == v1alpha2.DataSourceTypeUpload {
		container.Ports = append(container.Ports, importerpod.UploadContainerPort())
	}
	container.VolumeMounts = mounts
	return &corev1.Pod{ObjectMeta: c.meta(k, img), Spec: importerpod.Spec(container, volumes)}
}

// ServiceName is the name of the uploader Service of the image key of kind short: a DNS label,
// so a hash of the key ("vi-upload-<16 hex digits>").
func ServiceName(short string, key types.NamespacedName) string {
	return short + "-upload-" + hash(key.String())[:16]
}

// UploaderService is the Service in front of img's uploader (an Upload source's importer Pod).
func (c PodConfig) UploaderService(k Kind, img Image) *corev1.Service {
	m := c.meta(k, img)
	m.Name = ServiceName(k.Short(), client.ObjectKeyFromObject(img.Object))
	return importerpod.UploaderService(m, map[string]string{LabelImageKind: k.Short(), LabelImageUID: string(img.Object.GetUID())}, c.UploadServiceType)
}

// UploadURLs are where the user uploads img (status.imageUploadURLs): its Service's in-cluster
// address, and its node port at the uploader's node for a NodePort Service (svc, nil when not
// read).
func (c PodConfig) UploadURLs(k Kind, img Image, svc *corev1.Service, uploader *corev1.Pod) *v1alpha2.ImageUploadURLs {
	return importerpod.UploadURLs(ServiceName(k.Short(), client.ObjectKeyFromObject(img.Object)), c.Namespace, svc, uploader)
}
