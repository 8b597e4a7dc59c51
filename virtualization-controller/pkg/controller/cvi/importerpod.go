package cvi

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// PodConfig is what every importer Pod shares.
type PodConfig struct {
	Namespace string
	Image     string
	// DVCRAddress is DVCR's push address (host:port); DVCRPullAddress its read-only one.
	DVCRAddress     string
	DVCRPullAddress string
	// DVCRPusherSecret holds .dockerconfigjson, DVCRTLSSecret ca.crt: importer Pods mount them.
	DVCRPusherSecret string
	DVCRTLSSecret    string
}

const (
	// LabelCVIUID marks an importer Pod with the UID of its image.
	LabelCVIUID = "virtualization.deckhouse.io/cvi-uid"
	metricsPort = 8080
	caDir       = "/etc/dvcr/tls"
	authDir     = "/etc/dvcr/auth"
	scratchDir  = "/scratch"
)

// Repository is the image's repository in DVCR.
func Repository(name string) string { return "cvi/" + name }

// RegistryURL is where virtual machines pull the image from (status.target.registryURL).
func (c PodConfig) RegistryURL(name string) string {
	return c.DVCRPullAddress + "/" + Repository(name) + ":latest"
}

// PushRef is the image in DVCR at its push address, as the importer pushes it.
func (c PodConfig) PushRef(name string) string {
	return c.DVCRAddress + "/" + Repository(name) + ":latest"
}

// PodName is the importer Pod's name for the image name: "cvi-importer-<name>", shortened with a
// hash when that would not be a valid Pod name (at most 253 characters).
func PodName(name string) string {
	const prefix = "cvi-importer-"
	n := prefix + name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:10]
	return n[:253-len(h)-1] + "-" + h
}

// MetricsURL is where a running importer Pod serves its progress.
func MetricsURL(pod *corev1.Pod) string {
	return "http://" + pod.Status.PodIP + ":" + strconv.Itoa(metricsPort) + contract.MetricsPath
}

// ImporterPod is the one builder of a ClusterVirtualImage's importer Pod. cvi's source must be
// supported (Decide checks it first).
func (c PodConfig) ImporterPod(cvi *v1alpha2.ClusterVirtualImage) *corev1.Pod {
	h := cvi.Spec.DataSource.HTTP
	args := []string{
		flag(contract.FlagSourceURL, h.URL),
		flag(contract.FlagDestinationImage, c.PushRef(cvi.Name)),
		flag(contract.FlagDestinationCABundle, path.Join(caDir, "ca.crt")),
		flag(contract.FlagDestinationAuthFile, path.Join(authDir, corev1.DockerConfigJsonKey)),
		flag(contract.FlagScratchDir, scratchDir),
		flag(contract.FlagMetricsAddress, ":"+strconv.Itoa(metricsPort)),
	}
	if cs := h.Checksum; cs != nil {
		for _, kv := range [][2]string{{contract.FlagMD5, cs.MD5}, {contract.FlagSHA1, cs.SHA1}, {contract.FlagSHA256, cs.SHA256}, {contract.FlagSHA512, cs.SHA512}} {
			if kv[1] != "" {
				args = append(args, flag(kv[0], kv[1]))
			}
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodName(cvi.Name),
			Namespace: c.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/name":       "importer",
				"app.kubernetes.io/managed-by": "virtualization-controller",
				LabelCVIUID:                    string(cvi.UID),
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha2.SchemeGroupVersion.String(),
				Kind:       "ClusterVirtualImage",
				Name:       cvi.Name,
				UID:        cvi.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:                     importerContainer,
				Image:                    c.Image,
				Args:                     args,
				Ports:                    []corev1.ContainerPort{{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP}},
				TerminationMessagePath:   contract.DefaultTerminationMessagePath,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: contract.MetricsPath, Port: intstr.FromInt32(metricsPort),
				}}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "dvcr-tls", MountPath: caDir, ReadOnly: true},
					{Name: "dvcr-auth", MountPath: authDir, ReadOnly: true},
					{Name: "scratch", MountPath: scratchDir},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "dvcr-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: c.DVCRTLSSecret, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}}},
				{Name: "dvcr-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: c.DVCRPusherSecret, Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: corev1.DockerConfigJsonKey}},
				}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

func flag(name, value string) string { return "--" + name + "=" + value }
