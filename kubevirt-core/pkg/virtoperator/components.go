package virtoperator

import (
	"fmt"
	"reflect"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// kindOf names the kind of a built object: the builders leave TypeMeta empty, as typed clients do.
func kindOf(o client.Object) string {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GetKind()
	}
	return reflect.TypeOf(o).Elem().Name()
}

// APIObjects are virt-api's: its account and RBAC, certificates, Services (the metrics one
// too), Deployment, the subresources APIService and the webhook configurations.
func (in Install) APIObjects(c Certs) []client.Object {
	out := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: in.meta(APIServiceAccount, "")},
		in.certSecret(APICertSecret, APIName, c),
		in.certSecret(HandlerClientCertSecret, APIName, c),
		in.service(APIService, APIName, 443, intstr.FromString("virt-api")),
		in.service(WebhookService, APIName, 443, intstr.FromString("webhooks")),
		in.apiDeployment(c),
		in.validatingWebhooks(c),
		in.mutatingWebhooks(c),
	}
	for _, v := range virtapicontract.SubresourcesVersions {
		out = append(out, in.subresourcesAPIService(v, c))
	}
	out = append(out, in.metricsObjects(APIName, c)...)
	return append(out, in.apiRBAC()...)
}

// ControllerObjects are virt-controller's: its account, RBAC, Deployment, and its metrics
// Service and certificate.
func (in Install) ControllerObjects(c Certs) []client.Object {
	out := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: in.meta(ControllerServiceAccount, "")},
		in.controllerDeployment(c),
	}
	out = append(out, in.metricsObjects(ControllerName, c)...)
	return append(out, in.controllerRBAC()...)
}

// HandlerObjects are virt-handler's: its account, RBAC, serving certificate, DaemonSet, and its
// metrics Service and certificate. With CommonObjects (the sidecar's kubeconfig) they are all a
// node needs to run VMs.
func (in Install) HandlerObjects(c Certs) []client.Object {
	out := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: in.meta(HandlerServiceAccount, "")},
		in.certSecret(HandlerServerCertSecret, HandlerName, c),
		in.HandlerDaemonSet(c),
	}
	out = append(out, in.metricsObjects(HandlerName, c)...)
	return append(out, in.handlerRBAC()...)
}

func (in Install) service(name, component string, port int32, target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: in.meta(name, component),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{kubevirtv1.AppLabel: component},
			Ports:    []corev1.ServicePort{{Name: "https", Port: port, TargetPort: target, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// volume mounts of every component: the kubeconfig that points at the sidecar.
func kubeconfigVolume() corev1.Volume {
	return corev1.Volume{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: KubeconfigConfigMap},
	}}}
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

func kubeconfigDir(component string) string { return "/etc/" + component + "/kubeconfig" }

func kubeconfigFlag(component string) string {
	return "--kubeconfig=" + kubeconfigDir(component) + "/kubeconfig"
}

// podLabels are the labels of a component's pods; the selector is the kubevirt.io label alone, as
// KubeVirt's, because a selector can never change.
func (in Install) podLabels(component string) map[string]string {
	l := in.labels(component)
	if len(validation.IsValidLabelValue(in.Version)) == 0 {
		l[kubevirtv1.AppVersionLabel] = in.Version
	}
	return l
}

func selector(component string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{kubevirtv1.AppLabel: component}}
}

func requests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

func httpProbe(path string, port int) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(port)), Scheme: corev1.URISchemeHTTP}},
		PeriodSeconds:    10,
		TimeoutSeconds:   5,
		FailureThreshold: 3,
	}
}

// restricted is the security context of the components that need nothing of the node.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// rewriter is the kube-api-rewriter sidecar of a component. Its api listener stays on the pod's
// loopback, where the component's kubeconfig points; it talks to the apiserver with the pod's
// service account (in-cluster config). webhookCerts, when set, is the volume with the TLS pair of
// its webhook listener, which forwards restored AdmissionReviews to virt-api on loopback.
func (in Install) rewriter(webhookCerts string) corev1.Container {
	c := corev1.Container{
		Name:    RewriterName,
		Image:   in.Images.Rewriter,
		Command: []string{RewriterName},
		Args: append([]string{
			"--api-listen=" + rewriterAPIAddr,
			"--health-listen=:" + strconv.Itoa(rewriterHealthPort),
			"--metrics-listen=" + rewriterMetricsAddr,
		}, in.Log.Args()...),
		Ports:                    []corev1.ContainerPort{{Name: "rewriter-health", ContainerPort: rewriterHealthPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe:           httpProbe("/readyz", rewriterHealthPort),
		Resources:                requests("10m", "32Mi"),
		ImagePullPolicy:          in.PullPolicy,
		SecurityContext:          restricted(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if webhookCerts != "" {
		const dir = "/etc/kube-api-rewriter/webhook"
		c.Args = append(c.Args,
			"--webhook-listen=:"+strconv.Itoa(rewriterWebhookPort),
			"--webhook-target=https://"+apiWebhookAddr,
			"--webhook-cert="+dir+"/"+corev1.TLSCertKey,
			"--webhook-key="+dir+"/"+corev1.TLSPrivateKeyKey,
		)
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "webhooks", ContainerPort: rewriterWebhookPort, Protocol: corev1.ProtocolTCP})
		c.VolumeMounts = []corev1.VolumeMount{{Name: webhookCerts, MountPath: dir, ReadOnly: true}}
	}
	return c
}

// place applies a KubeVirt's node placement on top of the component's defaults.
func place(spec *corev1.PodSpec, p *kubevirtv1.NodePlacement) {
	spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
	if p == nil {
		return
	}
	for k, v := range p.NodeSelector {
		spec.NodeSelector[k] = v
	}
	if p.Affinity != nil {
		spec.Affinity = p.Affinity.DeepCopy()
	}
	for _, t := range p.Tolerations {
		spec.Tolerations = append(spec.Tolerations, *t.DeepCopy())
	}
}

// spread prefers the replicas of a component on different nodes, unless the KubeVirt places them.
func spread(spec *corev1.PodSpec, component string) {
	if spec.Affinity != nil {
		return
	}
	spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 1,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: selector(component), TopologyKey: corev1.LabelHostname,
			},
		}},
	}}
}

func (in Install) apiDeployment(c Certs) *appsv1.Deployment {
	const certDir, handlerDir = "/etc/virt-api/certificates", "/etc/virt-api/handler-certs"
	api := corev1.Container{
		Name:    APIName,
		Image:   in.Images.API,
		Command: []string{APIName},
		Args: []string{
			kubeconfigFlag(APIName),
			"--listen=:" + strconv.Itoa(apiPort),
			"--tls-cert-file=" + certDir + "/" + corev1.TLSCertKey,
			"--tls-key-file=" + certDir + "/" + corev1.TLSPrivateKeyKey,
			// The webhook server only answers the sidecar, on loopback.
			"--webhook-listen=" + apiWebhookAddr,
			"--handler-port=" + strconv.Itoa(handlerPort),
			"--metrics-bind-address=" + metricsAddr,
			"--handler-ca-file=" + handlerDir + "/ca.crt",
			"--handler-client-cert-file=" + handlerDir + "/" + corev1.TLSCertKey,
			"--handler-client-key-file=" + handlerDir + "/" + corev1.TLSPrivateKeyKey,
			// The core's ServiceAccounts in it may change VMI specs (virtapicontract.SystemUsers).
			"--namespace=" + in.Namespace,
		},
		Ports: []corev1.ContainerPort{{Name: "virt-api", ContainerPort: apiPort, Protocol: corev1.ProtocolTCP}},
		// virt-api answers only authenticated requests, so readiness is its TLS port accepting.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(apiPort)}},
			PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 3,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "kubeconfig", MountPath: kubeconfigDir(APIName), ReadOnly: true},
			{Name: "certificates", MountPath: certDir, ReadOnly: true},
			{Name: "handler-certs", MountPath: handlerDir, ReadOnly: true},
		},
		Resources:                requests("10m", "64Mi"),
		ImagePullPolicy:          in.PullPolicy,
		SecurityContext:          restricted(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	api.Args = append(api.Args, in.Log.Args()...)
	proxies, proxyCerts := in.metricsProxies(APIName)
	spec := corev1.PodSpec{
		ServiceAccountName: APIServiceAccount,
		Containers:         append([]corev1.Container{api, in.rewriter("certificates")}, proxies...),
		Volumes: []corev1.Volume{
			kubeconfigVolume(), secretVolume("certificates", APICertSecret), secretVolume("handler-certs", HandlerClientCertSecret), proxyCerts,
		},
		ImagePullSecrets: in.PullSecrets,
	}
	place(&spec, in.Infra)
	spread(&spec, APIName)
	return in.deployment(APIName, spec, certsHash(c, APICertSecret, HandlerClientCertSecret, APIMetricsCertSecret))
}

func (in Install) controllerDeployment(c Certs) *appsv1.Deployment {
	ctrl := corev1.Container{
		Name:    ControllerName,
		Image:   in.Images.Controller,
		Command: []string{ControllerName},
		Args: []string{
			kubeconfigFlag(ControllerName),
			"--leader-elect=true",
			"--leader-election-namespace=" + in.Namespace,
			"--launcher-image=" + in.Images.Launcher,
			"--metrics-bind-address=" + metricsAddr,
			"--health-probe-bind-address=:" + strconv.Itoa(probePort),
		},
		Ports:          []corev1.ContainerPort{{Name: "health", ContainerPort: probePort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: httpProbe("/readyz", probePort),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "kubeconfig", MountPath: kubeconfigDir(ControllerName), ReadOnly: true},
		},
		Resources:                requests("10m", "128Mi"),
		ImagePullPolicy:          in.PullPolicy,
		SecurityContext:          restricted(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	// virt-controller passes its log options on to the launchers.
	ctrl.Args = append(ctrl.Args, in.Log.Args()...)
	if in.Emulation {
		ctrl.Args = append(ctrl.Args, "--use-emulation")
	}
	proxies, proxyCerts := in.metricsProxies(ControllerName)
	spec := corev1.PodSpec{
		ServiceAccountName: ControllerServiceAccount,
		Containers:         append([]corev1.Container{ctrl, in.rewriter("")}, proxies...),
		Volumes:            []corev1.Volume{kubeconfigVolume(), proxyCerts},
		ImagePullSecrets:   in.PullSecrets,
	}
	place(&spec, in.Infra)
	spread(&spec, ControllerName)
	return in.deployment(ControllerName, spec, certsHash(c, ControllerMetricsCertSecret))
}

func (in Install) deployment(name string, spec corev1.PodSpec, certsHash string) *appsv1.Deployment {
	spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: in.podLabels(name)}, Spec: spec}
	if certsHash != "" {
		tmpl.Annotations = map[string]string{CertificatesHashAnnotation: certsHash}
	}
	return &appsv1.Deployment{
		ObjectMeta: in.meta(name, name),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(in.Replicas),
			Selector: selector(name),
			Template: tmpl,
		},
	}
}

// kubeletPods is the kubelet's pods directory, where virt-handler finds the launchers' sockets
// and volumes.
const kubeletPods = "/var/lib/kubelet/pods"

// HandlerDaemonSet is virt-handler on every node that runs VMs, with its rewriter sidecar and the
// kube-rbac-proxies in front of their metrics. It
// asks of the node's kubelet what any kubelet gives: the pods directory (a host path, with
// mount propagation from the host), emptyDir volumes, privileged containers and the node's name
// in the environment.
func (in Install) HandlerDaemonSet(c Certs) *appsv1.DaemonSet {
	const certDir = "/etc/virt-handler/certs"
	handler := corev1.Container{
		Name:    HandlerName,
		Image:   in.Images.Handler,
		Command: []string{HandlerName},
		Args: []string{
			kubeconfigFlag(HandlerName),
			"--pods-dir=" + kubeletPods,
			"--listen=:" + strconv.Itoa(handlerPort),
			"--tls-cert-file=" + certDir + "/" + corev1.TLSCertKey,
			"--tls-key-file=" + certDir + "/" + corev1.TLSPrivateKeyKey,
			"--client-ca-file=" + certDir + "/ca.crt",
			"--metrics-bind-address=" + metricsAddr,
			"--health-probe-bind-address=:" + strconv.Itoa(probePort),
			"--node-labeller-dir=" + launcherapi.NodeLabellerDir,
			// Hotplugged volumes are bind-mounted in the node init's mount namespace (HostPID).
			"--host-mount-namespace=" + in.HostMountNamespace,
		},
		Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"},
		}}},
		Ports: []corev1.ContainerPort{
			{Name: "handler", ContainerPort: handlerPort, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: probePort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: httpProbe("/readyz", probePort),
		VolumeMounts: []corev1.VolumeMount{
			// Volumes of launcher pods that appear after the handler started must show up too.
			{Name: "kubelet-pods", MountPath: kubeletPods, MountPropagation: ptr(corev1.MountPropagationHostToContainer)},
			{Name: "certificates", MountPath: certDir, ReadOnly: true},
			{Name: "kubeconfig", MountPath: kubeconfigDir(HandlerName), ReadOnly: true},
			{Name: launcherapi.NodeLabellerVolume, MountPath: launcherapi.NodeLabellerDir, ReadOnly: true},
		},
		Resources:       requests("10m", "128Mi"),
		ImagePullPolicy: in.PullPolicy,
		// It reads and writes the launchers' files on the node as root.
		SecurityContext:          &corev1.SecurityContext{Privileged: ptr(true)},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	handler.Args = append(handler.Args, in.Log.Args()...)
	// KubeVirt's node labeller init container: the launcher image's libvirt, asked what this node
	// offers guests (KVM when /dev/kvm opens, else TCG), leaves its answers for the handler.
	labeller := corev1.Container{
		Name:    "virt-launcher",
		Image:   in.Images.Launcher,
		Command: []string{"virt-launcher"},
		Args: append([]string{"--node-labeller-dir=" + launcherapi.NodeLabellerDir, "--qemu-capabilities-dir=" + launcherapi.QEMUCapsDir},
			in.Log.Args()...),
		VolumeMounts: []corev1.VolumeMount{
			{Name: launcherapi.NodeLabellerVolume, MountPath: launcherapi.NodeLabellerDir},
			// Its libvirtd's QEMU capabilities, for the launchers on the node (launcherapi.QEMUCapsHostDir).
			{Name: launcherapi.QEMUCapsVolume, MountPath: launcherapi.QEMUCapsDir},
		},
		Resources:                requests("10m", "64Mi"),
		ImagePullPolicy:          in.PullPolicy,
		SecurityContext:          &corev1.SecurityContext{Privileged: ptr(true)},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if in.Emulation {
		labeller.Args = append(labeller.Args, "--emulation")
	}
	proxies, proxyCerts := in.metricsProxies(HandlerName)
	spec := corev1.PodSpec{
		ServiceAccountName: HandlerServiceAccount,
		// As KubeVirt's: the node's processes, pid 1 among them, are the handler's to see.
		HostPID:        true,
		InitContainers: []corev1.Container{labeller},
		Containers:     append([]corev1.Container{handler, in.rewriter("")}, proxies...),
		Volumes: []corev1.Volume{
			{Name: "kubelet-pods", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: kubeletPods, Type: ptr(corev1.HostPathDirectory),
			}}},
			secretVolume("certificates", HandlerServerCertSecret),
			kubeconfigVolume(),
			{Name: launcherapi.NodeLabellerVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			launcherapi.QEMUCapsHostVolume(),
			proxyCerts,
		},
		// KubeVirt's handler runs on nodes reserved for critical add-ons too.
		Tolerations:      []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		ImagePullSecrets: in.PullSecrets,
	}
	place(&spec, in.Workloads)
	return &appsv1.DaemonSet{
		ObjectMeta: in.meta(HandlerName, HandlerName),
		Spec: appsv1.DaemonSetSpec{
			Selector: selector(HandlerName),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      in.podLabels(HandlerName),
					Annotations: map[string]string{CertificatesHashAnnotation: certsHash(c, HandlerServerCertSecret, HandlerMetricsCertSecret)},
				},
				Spec: spec,
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
		},
	}
}

// objectKey identifies an object across kinds, for pruning and messages.
func objectKey(kind, namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%s %s", kind, name)
	}
	return fmt.Sprintf("%s %s/%s", kind, namespace, name)
}
