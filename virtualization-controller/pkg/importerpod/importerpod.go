// Package importerpod is what every importer Pod has in common, whichever controller runs it:
// the importer container (name, metrics port and readiness, termination message, requests,
// security) and the Pod spec around it. The controllers add the arguments, volumes and mounts
// of their import.
package importerpod

import (
	"context"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/logopts"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

// MetricsPort is where the importer serves its progress and readiness.
const MetricsPort = 8080

// Container is the importer container of image, logging as log says (its first arguments),
// without the import's arguments or mounts: the controllers append them.
func Container(image string, log logopts.Options) corev1.Container {
	return corev1.Container{
		Name:                     importerresult.Container,
		Image:                    image,
		Args:                     log.Args(),
		Ports:                    []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP}},
		TerminationMessagePath:   contract.DefaultTerminationMessagePath,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: contract.MetricsPath, Port: intstr.FromInt32(MetricsPort),
		}}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("100m"),
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// Spec is the Pod spec that runs c once with volumes, without the service account's token.
func Spec(c corev1.Container, volumes []corev1.Volume) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{c},
		Volumes:                      volumes,
	}
}

// Flag is the importer's flag name set to value, as an argument.
func Flag(name, value string) string { return "--" + name + "=" + value }

// MetricsURL is where a running importer Pod serves its progress.
func MetricsURL(pod *corev1.Pod) string {
	return "http://" + pod.Status.PodIP + ":" + strconv.Itoa(MetricsPort) + contract.MetricsPath
}

// Scraper reads a running importer's progress from its metrics URL.
type Scraper interface {
	Scrape(ctx context.Context, url string) (importerprogress.Progress, error)
}

// ReadProgress is the progress of the importer in pod (an importer, an uploader, a filler, an
// inspector); nil when it cannot be read (yet: no address, not serving).
func ReadProgress(ctx context.Context, s Scraper, pod *corev1.Pod) *importerprogress.Progress {
	if pod.Status.PodIP == "" {
		return nil
	}
	got, err := s.Scrape(ctx, MetricsURL(pod))
	if err != nil {
		log.FromContext(ctx).V(1).Info("importer progress not read", "pod", pod.Name, "error", err.Error())
		return nil
	}
	return &got
}
