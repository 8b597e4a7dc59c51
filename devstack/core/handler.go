package core

import (
	"context"
	"fmt"
	"os"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/hotplug"
)

// Images of the core as the node agent runs them: it maps an image to the binary of the same
// name that `make build` puts in bin/.
const (
	HandlerImage  = "d8v.local/virt-handler:dev"
	RewriterImage = "d8v.local/kube-api-rewriter:dev"
	LauncherImage = "d8v.local/virt-launcher:dev"
)

const (
	handlerName      = "virt-handler"
	handlerSA        = "kubevirt-handler"
	handlerCertsName = "virt-handler-certs"
	handlerKubecfg   = "virt-handler-kubeconfig"
	// kubeletPods is the kubelet's pods directory as a node shows it to hostPath volumes.
	kubeletPods = "/var/lib/kubelet/pods"
)

// HandlerMetricsPort is virt-handler's metrics port on its Pod's address.
const HandlerMetricsPort = 8080

// sidecarKubeconfig points a component at its rewriter sidecar on the Pod's loopback.
const sidecarKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: rewriter, cluster: {server: "http://127.0.0.1:23915"}}]
contexts: [{name: rewriter, context: {cluster: rewriter}}]
current-context: rewriter
`

// handlerObjects are virt-handler's DaemonSet and what it needs, as a chart would install them:
// its service account, a kubeconfig for its rewriter sidecar, and its certificates (serving, and
// the CA virt-api's client certificates come from). The account is bound to cluster-admin until
// the core's RBAC manifests exist.
func handlerObjects(s *controlplane.Stack) ([]func(context.Context, kubernetes.Interface) error, error) {
	certFile, keyFile, err := s.IssueCert(handlerName, []string{handlerName}, nil)
	if err != nil {
		return nil, err
	}
	var files [3][]byte
	for i, f := range []string{certFile, keyFile, s.CAFile()} {
		if files[i], err = os.ReadFile(f); err != nil {
			return nil, fmt.Errorf("handler certificates: %w", err)
		}
	}
	labels := map[string]string{"kubevirt.io": handlerName}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: handlerName, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: handlerSA,
					// The node labeller's data: what the launcher's libvirt offers guests here,
					// under TCG as the stack's guests run (virt-controller --use-emulation).
					InitContainers: []corev1.Container{{
						Name:         "virt-launcher",
						Image:        LauncherImage,
						Command:      []string{"virt-launcher", "--node-labeller-dir=" + launcherapi.NodeLabellerDir, "--emulation"},
						VolumeMounts: []corev1.VolumeMount{{Name: launcherapi.NodeLabellerVolume, MountPath: launcherapi.NodeLabellerDir}},
					}},
					Containers: []corev1.Container{
						{
							Name:  handlerName,
							Image: HandlerImage,
							Command: []string{
								"virt-handler", "--kubeconfig=/etc/virt-handler/kubeconfig/kubeconfig",
								"--pods-dir=" + kubeletPods,
								"--tls-cert-file=/etc/virt-handler/certs/tls.crt", "--tls-key-file=/etc/virt-handler/certs/tls.key",
								"--client-ca-file=/etc/virt-handler/certs/ca.crt",
								// No kube-rbac-proxy fronts it here, so it serves on the pod's address.
								"--metrics-bind-address=:" + strconv.Itoa(HandlerMetricsPort), "--health-probe-bind-address=127.0.0.1:8081",
								"--heartbeat-interval=30s",
								"--node-labeller-dir=" + launcherapi.NodeLabellerDir, "--node-labeller-interval=10s",
								// The node agent starts containers from its shim, which runs in this
								// machine's mount namespace (the nodes'); pid 1's may be out of reach
								// in the sandbox the stack runs in.
								"--host-mount-namespace=" + hotplug.ParentMountNamespace,
							},
							Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
							}}},
							VolumeMounts: []corev1.VolumeMount{
								{Name: "kubelet-pods", MountPath: kubeletPods},
								{Name: "certs", MountPath: "/etc/virt-handler/certs", ReadOnly: true},
								{Name: "kubeconfig", MountPath: "/etc/virt-handler/kubeconfig", ReadOnly: true},
								{Name: launcherapi.NodeLabellerVolume, MountPath: launcherapi.NodeLabellerDir, ReadOnly: true},
							},
						},
						{
							Name:  "kube-api-rewriter",
							Image: RewriterImage,
							Command: []string{
								"kube-api-rewriter", "--api-listen=127.0.0.1:23915", "--health-listen=127.0.0.1:8082",
								"--metrics-listen=", "--log-format=text",
							},
						},
					},
					Volumes: []corev1.Volume{
						{Name: "kubelet-pods", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: kubeletPods}}},
						{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: handlerCertsName}}},
						{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: handlerKubecfg},
						}}},
						{Name: launcherapi.NodeLabellerVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
	return []func(context.Context, kubernetes.Interface) error{
		func(ctx context.Context, k kubernetes.Interface) error {
			_, err := k.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: handlerSA}}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, k kubernetes.Interface) error {
			_, err := k.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-handler-local"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: handlerSA, Namespace: Namespace}},
			}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, k kubernetes.Interface) error {
			_, err := k.CoreV1().Secrets(Namespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: handlerCertsName},
				Data:       map[string][]byte{"tls.crt": files[0], "tls.key": files[1], "ca.crt": files[2]},
			}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, k kubernetes.Interface) error {
			_, err := k.CoreV1().ConfigMaps(Namespace).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: handlerKubecfg},
				Data:       map[string]string{"kubeconfig": sidecarKubeconfig},
			}, metav1.CreateOptions{})
			return err
		},
		func(ctx context.Context, k kubernetes.Interface) error {
			_, err := k.AppsV1().DaemonSets(Namespace).Create(ctx, ds, metav1.CreateOptions{})
			return err
		},
	}, nil
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

// installHandler creates the handler's objects; existing ones stay as they are.
func installHandler(ctx context.Context, s *controlplane.Stack) error {
	kube, err := kubevirtClient(s)
	if err != nil {
		return err
	}
	objs, err := handlerObjects(s)
	if err != nil {
		return err
	}
	for _, create := range objs {
		if err := create(ctx, kube); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("install virt-handler: %w", err)
		}
	}
	return nil
}
