package virtoperator

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

// Metrics behind kube-rbac-proxy.
//
// Every component and every kube-api-rewriter sidecar serves Prometheus metrics in plain HTTP on
// the pod's loopback only (metricsAddr, rewriterMetricsAddr). What leaves the pod is a stock
// kube-rbac-proxy (github.com/brancz/kube-rbac-proxy) per metrics listener: it serves TLS with a
// certificate the operator issues like its others, authenticates the caller's bearer token with a
// TokenReview, authorizes it with a SubjectAccessReview (its default non-resource check: verb get
// on the request's path, /metrics) and only then forwards to the loopback listener. A scraper
// gets in with a token of an account bound to MetricsReaderRole.
//
// The operator adds these containers itself, in the builders below, rather than leaving them to
// spec.customizeComponents patches (as the reference module does): the builders are the one place
// the components' objects are made, and a patch would be a second, hand-written copy of the
// ports, certificates and RBAC that drifts from them. Stock kube-rbac-proxy forwards to exactly one
// upstream, so a pod has one per metrics listener: one for the component, one for its rewriter.

// KubeRBACProxyName is the kube-rbac-proxy's image name and the name of the containers in front
// of the components' own metrics; the one in front of a rewriter's is RewriterMetricsProxyName.
const KubeRBACProxyName = "kube-rbac-proxy"

// RewriterMetricsProxyName is the kube-rbac-proxy container in front of a rewriter's metrics.
const RewriterMetricsProxyName = "kube-rbac-proxy-rewriter"

// Ports and names of the metrics: the same in every pod, so one ServiceMonitor shape fits all.
// A container port name has at most 15 characters, hence "metrics-rewrite" (the chart names the
// operator's own rewriter metrics port the same). The Services use the same names for their ports.
const (
	MetricsPortName         = "metrics"
	RewriterMetricsPortName = "metrics-rewrite"
	MetricsPort             = 8444
	RewriterMetricsPort     = 8445
	// MetricsPath is what the proxies let through; every other path is a 404.
	MetricsPath = "/metrics"
	// MetricsLabel ("true") marks the metrics Services, KubeVirt's label for what Prometheus
	// scrapes. The rewriter renames its prefix in the cluster (to
	// prometheus.kubevirt.internal.virtualization.deckhouse.io), where ServiceMonitors select it.
	MetricsLabel = "prometheus.kubevirt.io"
	// MetricsReaderRole grants get on /metrics: bind a scraper's account to it.
	MetricsReaderRole = "kubevirt-internal-virtualization-metrics-reader"
)

// Serving certificates of the proxies, one per component: a pod mounts only its own.
const (
	APIMetricsCertSecret        = "kubevirt-virt-api-metrics-certs"
	ControllerMetricsCertSecret = "kubevirt-virt-controller-metrics-certs"
	HandlerMetricsCertSecret    = "kubevirt-virt-handler-metrics-certs"
)

// MetricsService is the name of a component's metrics Service.
func MetricsService(component string) string { return component + "-metrics" }

// metricsCertSecret is the proxies' certificate of a component.
func metricsCertSecret(component string) string {
	switch component {
	case APIName:
		return APIMetricsCertSecret
	case ControllerName:
		return ControllerMetricsCertSecret
	}
	return HandlerMetricsCertSecret
}

// metricsLeaves are the proxies' serving certificates, for the names of the metrics Services.
func (in Install) metricsLeaves() map[string]certs.Leaf {
	out := map[string]certs.Leaf{}
	for _, c := range []string{APIName, ControllerName, HandlerName} {
		svc := MetricsService(c)
		out[metricsCertSecret(c)] = certs.Leaf{CommonName: svc + "." + in.Namespace + ".svc", DNSNames: serviceNames(svc, in.Namespace)}
	}
	return out
}

// metricsCertsVolume is the volume of a pod's proxies' certificate.
const metricsCertsVolume = "metrics-certs"

// metricsProxies are the kube-rbac-proxy containers of a component's pod and the volume of their
// certificate: one in front of the component's metrics (metricsAddr), one in front of its
// rewriter's (rewriterMetricsAddr).
func (in Install) metricsProxies(component string) ([]corev1.Container, corev1.Volume) {
	return []corev1.Container{
		in.metricsProxy(KubeRBACProxyName, MetricsPortName, MetricsPort, metricsAddr),
		in.metricsProxy(RewriterMetricsProxyName, RewriterMetricsPortName, RewriterMetricsPort, rewriterMetricsAddr),
	}, secretVolume(metricsCertsVolume, metricsCertSecret(component))
}

// metricsProxy is one kube-rbac-proxy serving TLS on port, forwarding authorized requests for
// MetricsPath to the plain-HTTP listener at upstream on the pod's loopback. It has no command:
// the image's entrypoint is kube-rbac-proxy (on the local stack, the program named after the
// image). It talks to the apiserver directly with the pod's service account (in-cluster config),
// not through the rewriter: TokenReview and SubjectAccessReview are not renamed.
func (in Install) metricsProxy(name, portName string, port int32, upstream string) corev1.Container {
	const dir = "/etc/kube-rbac-proxy/certs"
	return corev1.Container{
		Name:  name,
		Image: in.Images.KubeRBACProxy,
		Args: []string{
			"--secure-listen-address=:" + strconv.Itoa(int(port)),
			"--upstream=http://" + upstream + "/",
			"--allow-paths=" + MetricsPath,
			"--tls-cert-file=" + dir + "/" + corev1.TLSCertKey,
			"--tls-private-key-file=" + dir + "/" + corev1.TLSPrivateKeyKey,
			"--tls-min-version=VersionTLS12",
		},
		Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		// Every request needs a token, so readiness is its TLS port accepting, as for virt-api.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(portName)}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		},
		VolumeMounts:             []corev1.VolumeMount{{Name: metricsCertsVolume, MountPath: dir, ReadOnly: true}},
		Resources:                requests("5m", "20Mi"),
		ImagePullPolicy:          in.PullPolicy,
		SecurityContext:          restricted(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// metricsObjects are a component's metrics Service and the proxies' certificate.
func (in Install) metricsObjects(component string, c Certs) []client.Object {
	svc := &corev1.Service{
		ObjectMeta: in.meta(MetricsService(component), component),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{kubevirtv1.AppLabel: component},
			Ports: []corev1.ServicePort{
				{Name: MetricsPortName, Port: MetricsPort, TargetPort: intstr.FromString(MetricsPortName), Protocol: corev1.ProtocolTCP},
				{Name: RewriterMetricsPortName, Port: RewriterMetricsPort, TargetPort: intstr.FromString(RewriterMetricsPortName), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	svc.Labels[MetricsLabel] = "true"
	return []client.Object{svc, in.certSecret(metricsCertSecret(component), component, c)}
}
