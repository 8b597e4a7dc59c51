package core

import (
	"context"
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

// Images of the core as the node agent runs them: it maps an image to the binary of the same
// name that `make build` puts in bin/ (kube-rbac-proxy is linked there from the machine-wide
// cache, see controlplane.LinkKubeRBACProxy).
const (
	HandlerImage       = "d8v.local/virt-handler:dev"
	RewriterImage      = "d8v.local/kube-api-rewriter:dev"
	LauncherImage      = "d8v.local/virt-launcher:dev"
	KubeRBACProxyImage = "d8v.local/kube-rbac-proxy:dev"
)

const handlerName = "virt-handler"

// handlerInstall is what virt-operator would resolve for the local stack: its images, and guests
// under TCG (KVM does not work here, see docs/development.md), which the node labeller reports.
func handlerInstall() virtoperator.Install {
	return virtoperator.Install{
		Namespace: Namespace,
		Images: virtoperator.Images{
			Handler: HandlerImage, Launcher: LauncherImage, Rewriter: RewriterImage, KubeRBACProxy: KubeRBACProxyImage,
		},
		PullPolicy: corev1.PullIfNotPresent,
		Emulation:  true,
	}
}

// handlerArgs are the local stack's settings of virt-handler, as a platform would set them: a
// faster heartbeat and node labeller, so that tests see a node change within seconds.
var handlerArgs = []string{
	"--heartbeat-interval=30s", "--node-labeller-interval=10s",
	// The node agent starts containers from its shim, in this machine's mount namespace (the
	// nodes'); pid 1's may be out of reach in the sandbox the stack runs in.
	"--host-mount-namespace=" + hotplug.ParentMountNamespace,
}

// handlerObjects are virt-handler's objects as virt-operator builds them (Install.HandlerObjects:
// its account and least-privilege RBAC, the DaemonSet with its rewriter sidecar and the
// kube-rbac-proxies in front of their metrics, the metrics Service), plus the sidecar's
// kubeconfig and the metrics reader ClusterRole. The certificates come from the stack's CA
// instead of the operator's, because virt-api runs outside the operator here and its client
// certificate comes from that CA too.
func handlerObjects(s *controlplane.Stack) ([]client.Object, error) {
	in := handlerInstall()
	c := virtoperator.Certs{Leaves: map[string]certs.KeyPair{}}
	for secret, names := range map[string][]string{
		virtoperator.HandlerServerCertSecret: {virtapicontract.HandlerServerName},
		virtoperator.HandlerMetricsCertSecret: {
			virtoperator.MetricsService(handlerName) + "." + Namespace + ".svc", virtoperator.MetricsService(handlerName),
		},
	} {
		certFile, keyFile, err := s.IssueCert(strings.TrimPrefix(secret, "kubevirt-"), names, nil)
		if err != nil {
			return nil, err
		}
		var pair certs.KeyPair
		if pair.Cert, err = os.ReadFile(certFile); err != nil {
			return nil, err
		}
		if pair.Key, err = os.ReadFile(keyFile); err != nil {
			return nil, err
		}
		c.Leaves[secret] = pair
	}
	// Issuing makes the CA first, when the stack has none yet.
	var err error
	if c.Bundle, err = os.ReadFile(s.CAFile()); err != nil {
		return nil, fmt.Errorf("stack CA: %w", err)
	}
	// The metrics reader role is the installation's, not the handler's; a scraper needs it.
	objs := append([]client.Object{in.KubeconfigObject(), in.MetricsReader()}, in.HandlerObjects(c)...)
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			ctr := &ds.Spec.Template.Spec.Containers[0]
			ctr.Args = append(ctr.Args, handlerArgs...)
		}
	}
	return objs, nil
}

// staleHandlerObjects are what the local stack installed before the handler came from
// virt-operator's builders, among them a binding of its account to cluster-admin.
var staleHandlerObjects = []client.Object{
	&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-handler-local"}},
	&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "virt-handler-certs"}},
	&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "virt-handler-kubeconfig"}},
}

// kubevirtClient talks to the stack through the users' rewriter, as an operator of the core
// would through its sidecar: kubevirt.io labels and selectors are renamed on the way in and out.
func kubevirtClient(s *controlplane.Stack) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", KubeconfigPath(s))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", KubeconfigPath(s), err)
	}
	return kubernetes.NewForConfig(cfg)
}

// installHandler applies the handler's objects with server-side apply, as virt-operator does,
// through the users' rewriter: they are written in kubevirt.io terms.
func installHandler(ctx context.Context, o Options) error {
	if err := controlplane.LinkKubeRBACProxy(o.BinDir); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", KubeconfigPath(o.Stack))
	if err != nil {
		return fmt.Errorf("load %s: %w", KubeconfigPath(o.Stack), err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	objs, err := handlerObjects(o.Stack)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		u, err := virtoperator.ToApply(obj, scheme)
		if err != nil {
			return err
		}
		if err := kc.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("devcluster"), client.ForceOwnership); err != nil {
			return fmt.Errorf("install virt-handler: apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	for _, obj := range staleHandlerObjects {
		if err := kc.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove the earlier virt-handler install: %w", err)
		}
	}
	return nil
}
