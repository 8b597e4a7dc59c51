// Package virtoperator installs kubevirt-core from a KubeVirt resource: virt-api, virt-controller
// and virt-handler, each with a kube-api-rewriter sidecar, their RBAC, certificates, Services,
// the subresources APIService and the admission webhook configurations, and reports their state
// in the KubeVirt's status.
//
// The builders (Objects and the Install methods) are pure: they turn a KubeVirt, the operator's
// Config and the certificates into the objects to apply, written in kubevirt.io terms like the
// rest of the core. The operator talks to the cluster through its own rewriter sidecar, which
// renames the groups, kinds and label keys inside them (RBAC rules, webhook rules, selectors) on
// the way. The Reconciler applies them with server-side apply and removes what it no longer wants.
package virtoperator

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

// Component and object names. They are KubeVirt's wherever KubeVirt has one, so that tools and
// runbooks written for KubeVirt find them.
const (
	APIName        = "virt-api"
	ControllerName = "virt-controller"
	HandlerName    = "virt-handler"
	RewriterName   = "kube-api-rewriter"

	APIServiceAccount        = virtapicontract.APIServiceAccount
	ControllerServiceAccount = virtapicontract.ControllerServiceAccount
	HandlerServiceAccount    = virtapicontract.HandlerServiceAccount

	// CASecret keeps the CA (tls.crt, tls.key) and the bundle peers trust (ca.crt).
	CASecret = "kubevirt-ca"
	// APICertSecret is virt-api's serving certificate, for the aggregator and the webhooks.
	APICertSecret = "kubevirt-virt-api-certs"
	// HandlerServerCertSecret is virt-handler's serving certificate, for the name virt-api checks.
	HandlerServerCertSecret = "kubevirt-virt-handler-server-certs"
	// HandlerClientCertSecret is the client certificate virt-api presents to virt-handler.
	HandlerClientCertSecret = "kubevirt-virt-handler-certs"
	// KubeconfigConfigMap points a component at its rewriter sidecar.
	KubeconfigConfigMap = "kube-api-rewriter-kubeconfig"

	// APIService is the Service the subresources APIService points at.
	APIService = "virt-api"
	// WebhookService is the Service of the rewriter sidecar's webhook listener in virt-api's pods.
	WebhookService = "virt-api-webhooks"
	// SubresourcesAPIService is the APIService of subresources.kubevirt.io/v1; each other version
	// of virtapicontract.SubresourcesVersions has one named the same way.
	SubresourcesAPIService = "v1." + virtapicontract.SubresourcesGroup
	// DefaultRole is KubeVirt's role of every authenticated user: the version and guestfs
	// information of virt-api, which clients read after any error.
	DefaultRole        = "kubevirt.io:default"
	ValidatingWebhooks = "virt-api-validator"
	MutatingWebhooks   = "virt-api-mutator"

	// FieldManager owns every field the operator applies.
	FieldManager = "virt-operator"
	// CertificatesHashAnnotation on a pod template changes with the certificates its pods load,
	// so that a rotation rolls them: the components read their certificates once, at start.
	CertificatesHashAnnotation = "kubevirt.io/certificates-hash"
)

// Listeners inside the pods.
const (
	rewriterAPIAddr     = "127.0.0.1:23915"
	rewriterHealthPort  = 8082
	rewriterWebhookPort = 24192
	rewriterMetricsAddr = "127.0.0.1:9090"
	apiPort             = 8443
	apiWebhookAddr      = "127.0.0.1:9443"
	handlerPort         = 8186
	probePort           = 8081
	// metricsAddr stays on loopback: a kube-rbac-proxy is meant to front it.
	metricsAddr = "127.0.0.1:8080"
)

// ManagedLabels mark every object the operator makes; it finds its objects by them, and the
// rewriter keeps them apart from a stock KubeVirt's (it renames the managed-by value).
func ManagedLabels() map[string]string {
	return map[string]string{
		kubevirtv1.ManagedByLabel:    kubevirtv1.ManagedByLabelOperatorValue,
		kubevirtv1.AppComponentLabel: kubevirtv1.AppComponent,
	}
}

// Certs are the certificates of an installation, as certs.Ensure keeps them; the leaves are keyed
// by the names of their Secrets.
type Certs = certs.Set

// CertSpec is the certificates an installation needs: virt-api's and virt-handler's, and the
// serving certificates of the kube-rbac-proxies in front of the metrics.
func (in Install) CertSpec() certs.Spec {
	leaves := map[string]certs.Leaf{
		APICertSecret: {CommonName: APIService + "." + in.Namespace + ".svc", DNSNames: append(
			serviceNames(APIService, in.Namespace), serviceNames(WebhookService, in.Namespace)...)},
		HandlerServerCertSecret: {CommonName: "kubevirt.io:system:node:virt-handler", DNSNames: []string{virtapicontract.HandlerServerName}},
		HandlerClientCertSecret: {CommonName: "kubevirt.io:system:client:virt-handler", Client: true},
	}
	maps.Copy(leaves, in.metricsLeaves())
	return certs.Spec{Policy: in.Certificates, Leaves: leaves}
}

// LeafSecrets are the Secrets of the leaf certificates, as CertSpec names them.
var LeafSecrets = []string{
	APICertSecret, HandlerServerCertSecret, HandlerClientCertSecret,
	APIMetricsCertSecret, ControllerMetricsCertSecret, HandlerMetricsCertSecret,
}

// serviceNames are the DNS names a Service answers to inside the cluster.
func serviceNames(svc, ns string) []string {
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
}

// CertsFromSecrets reads the certificates back from the Secrets Objects makes; missing ones stay
// empty, for certs.Ensure to issue.
func CertsFromSecrets(secrets []corev1.Secret) Certs {
	out := Certs{Leaves: map[string]certs.KeyPair{}}
	for _, s := range secrets {
		pair := certs.KeyPair{Cert: s.Data[corev1.TLSCertKey], Key: s.Data[corev1.TLSPrivateKeyKey]}
		switch s.Name {
		case CASecret:
			out.CA, out.Bundle = pair, s.Data["ca.crt"]
		default:
			if slices.Contains(LeafSecrets, s.Name) {
				out.Leaves[s.Name] = pair
			}
		}
	}
	return out
}

// Objects are every object the KubeVirt kv asks for, in the order they should be applied.
func Objects(kv *kubevirtv1.KubeVirt, cfg Config, c Certs) []client.Object {
	return NewInstall(kv, cfg).Objects(c)
}

// Objects are every object of the installation, in the order they should be applied: what pods
// mount and run as before the pods, and the APIService and webhooks, which send traffic to
// virt-api, last.
func (in Install) Objects(c Certs) []client.Object {
	var out []client.Object
	out = append(out, in.CommonObjects(c)...)
	out = append(out, in.APIObjects(c)...)
	out = append(out, in.ControllerObjects(c)...)
	out = append(out, in.HandlerObjects(c)...)
	out = append(out, in.UserRoles()...)
	out = append(out, in.MetricsReader())
	slices.SortStableFunc(out, func(a, b client.Object) int { return applyRank(a) - applyRank(b) })
	return out
}

func applyRank(o client.Object) int {
	switch o.(type) {
	case *corev1.Secret, *corev1.ConfigMap:
		return 0
	case *corev1.ServiceAccount:
		return 1
	}
	switch kindOf(o) {
	case "ClusterRole", "Role":
		return 2
	case "ClusterRoleBinding", "RoleBinding":
		return 3
	case "Service":
		return 4
	case "Deployment", "DaemonSet":
		return 5
	}
	return 6
}

// CommonObjects are shared by the components: the CA and the sidecars' kubeconfig.
func (in Install) CommonObjects(c Certs) []client.Object {
	ca := &corev1.Secret{
		ObjectMeta: in.meta(CASecret, ""),
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey: c.CA.Cert, corev1.TLSPrivateKeyKey: c.CA.Key, "ca.crt": c.Bundle,
		},
	}
	return []client.Object{ca, in.KubeconfigObject()}
}

// KubeconfigObject is the ConfigMap every component's kubeconfig comes from.
func (in Install) KubeconfigObject() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: in.meta(KubeconfigConfigMap, ""),
		Data:       map[string]string{"kubeconfig": SidecarKubeconfig},
	}
}

// SidecarKubeconfig points a component at its rewriter sidecar on the pod's loopback.
const SidecarKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: rewriter, cluster: {server: "http://` + rewriterAPIAddr + `"}}]
contexts: [{name: rewriter, context: {cluster: rewriter}}]
current-context: rewriter
`

// meta is the metadata of a namespaced object of the installation; component is the value of
// the kubevirt.io label (KubeVirt labels every object with its component, or "").
func (in Install) meta(name, component string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: in.Namespace, Labels: in.labels(component)}
	if in.Owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*in.Owner}
	}
	return m
}

// clusterMeta is the metadata of a cluster-scoped object (or one in another namespace): nothing
// can own it, the KubeVirt's finalizer removes it.
func (in Install) clusterMeta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: in.labels(component)}
}

func (in Install) labels(component string) map[string]string {
	l := ManagedLabels()
	l[kubevirtv1.AppLabel] = component
	return l
}

// certSecret stores a leaf with the bundle its peers are checked against.
func (in Install) certSecret(name, component string, c Certs) *corev1.Secret {
	pair := c.Leaves[name]
	return &corev1.Secret{
		ObjectMeta: in.meta(name, component),
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: pair.Cert, corev1.TLSPrivateKeyKey: pair.Key, "ca.crt": c.Bundle},
	}
}

// certsHash changes when any of the named certificates or the bundle changes.
func certsHash(c Certs, names ...string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write(c.Leaves[n].Cert)
		h.Write([]byte{0})
	}
	h.Write(c.Bundle)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
