package importerpod

import (
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
)

// An importer with an Upload source is an uploader: it waits at UploadPort for the user's
// `curl -T`, behind a ClusterIP Service of its own on port 80.

// AnnotationUploadToken on an object with an Upload source (an image or a disk) is the one token
// its uploader takes (`curl -T disk.qcow2 -H "Authorization: Bearer <token>" <status.imageUploadURLs.inCluster>`).
const AnnotationUploadToken = "virtualization.deckhouse.io/upload-token"

// UploadPort is where an uploader listens, named "upload".
const UploadPort = 8090

// UploadArgs are an uploader's source flags: it listens at UploadPort and takes the token in
// tokenFile, waiting at most timeout for the upload to begin.
func UploadArgs(tokenFile string, timeout time.Duration) []string {
	return []string{
		Flag(contract.FlagSourceUploadAddress, ":"+strconv.Itoa(UploadPort)),
		Flag(contract.FlagUploadTokenFile, tokenFile),
		Flag(contract.FlagUploadTimeout, timeout.String()),
	}
}

// UploadContainerPort is the uploader container's port for its Service.
func UploadContainerPort() corev1.ContainerPort {
	return corev1.ContainerPort{Name: "upload", ContainerPort: UploadPort, Protocol: corev1.ProtocolTCP}
}

// UploaderService is the Service (meta's name and namespace) in front of the uploader Pod that
// selector selects: port 80 to its "upload" port, of type typ (ClusterIP; NodePort gives the
// upload an external URL at the uploader's node, ExternalUploadURL).
func UploaderService(meta metav1.ObjectMeta, selector map[string]string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: "upload", Port: 80, TargetPort: intstr.FromString("upload"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// UploadURL is the in-cluster URL of an uploader behind the Service name in namespace.
func UploadURL(name, namespace string) string {
	return "http://" + name + "." + namespace + ".svc" + contract.UploadPath
}

// ExternalUploadURL is where the uploader pod behind svc is reached from outside the cluster: its
// node port at its node's address; "" when svc is no NodePort Service (or its port or the Pod's
// node is not known yet).
func ExternalUploadURL(svc *corev1.Service, pod *corev1.Pod) string {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Ports) == 0 || svc.Spec.Ports[0].NodePort == 0 || pod.Status.HostIP == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(pod.Status.HostIP, strconv.Itoa(int(svc.Spec.Ports[0].NodePort))) + contract.UploadPath
}

// UploadURLs are an uploader's URLs: in the cluster at its Service name of namespace, and
// outside it when ExternalUploadURL gives one.
func UploadURLs(name, namespace string, svc *corev1.Service, pod *corev1.Pod) *v1alpha2.ImageUploadURLs {
	return &v1alpha2.ImageUploadURLs{InCluster: UploadURL(name, namespace), External: ExternalUploadURL(svc, pod)}
}

// UploadNotBegun: an uploader still waits for the user's upload: its progress (p) read nothing
// yet; when p could not be read (nil), whether the object said so last time (waited).
func UploadNotBegun(p *importerprogress.Progress, waited bool) bool {
	if p == nil {
		return waited
	}
	return p.ReadBytes == 0
}

// Ready tells whether the Pod's Ready condition is True: an uploader is ready to take the upload.
func Ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// UploadHint is how to upload to urls (the external one when there is one), for the message of
// an object that waits for its upload.
func UploadHint(urls *v1alpha2.ImageUploadURLs) string {
	url := urls.InCluster
	if urls.External != "" {
		url = urls.External
	}
	return "waiting for the upload: curl -T disk.qcow2 -H \"Authorization: Bearer <the annotation " + AnnotationUploadToken + ">\" " + url
}
