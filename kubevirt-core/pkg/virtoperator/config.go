package virtoperator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virthandler/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
	"github.com/d8virt/logopts"
)

// Config is the operator's own configuration (flags and environment); a KubeVirt resource may
// override parts of it.
type Config struct {
	// ImagePrefix goes before each component's image name, e.g. "d8v.local/" gives
	// "d8v.local/virt-api:dev". spec.imageRegistry of the KubeVirt replaces it.
	ImagePrefix string
	// ImageTag is the images' tag; spec.imageTag of the KubeVirt replaces it.
	ImageTag string
	// RewriterImage is the kube-api-rewriter sidecar's image; empty means
	// <prefix>kube-api-rewriter:<tag>, the sidecar that ships with the core.
	RewriterImage string
	// KubeRBACProxyImage is the image of the kube-rbac-proxy in front of every metrics port; empty
	// means <prefix>kube-rbac-proxy:<tag>, a build of the stock proxy that ships with the core.
	KubeRBACProxyImage string
	// ImagePullPolicy applies when the KubeVirt does not set one.
	ImagePullPolicy corev1.PullPolicy
	// HostMountNamespace is virt-handler's --host-mount-namespace: where it bind-mounts
	// hotplugged volumes (hotplug.NewNodeMounter).
	HostMountNamespace string
	// Replicas of virt-api and virt-controller when spec.infra.replicas is unset.
	Replicas int32
	// OperatorVersion is reported in status.operatorVersion.
	OperatorVersion string
	// Certificates are the default lifetimes; spec.certificateRotateStrategy.selfSigned overrides.
	Certificates certs.Policy
	// Log is the operator's own log level and format, which it passes on to every program it
	// installs (the components, their rewriters, and through virt-controller the launchers).
	Log logopts.Options
}

// DefaultConfig is what the operator runs with when nothing is set.
func DefaultConfig() Config {
	return Config{
		ImageTag:           "latest",
		ImagePullPolicy:    corev1.PullIfNotPresent,
		HostMountNamespace: hotplug.DefaultHostMountNamespace,
		Replicas:           2,
		OperatorVersion:    "devel",
		// The components load their certificates once, so each rotation rolls their pods: the
		// lifetimes are long enough to make that rare.
		Certificates: certs.Policy{CALifetime: 365 * 24 * time.Hour, LeafLifetime: 30 * 24 * time.Hour},
		Log:          logopts.Default(),
	}
}

// Images are the resolved images of one installation.
type Images struct {
	API, Controller, Handler, Launcher, Rewriter, KubeRBACProxy string
}

// Install is everything the builders need to know about one installation, resolved from a
// KubeVirt and the operator's Config. Tools that install the core without a KubeVirt resource
// (the local stack) fill it themselves.
type Install struct {
	Namespace string
	// Owner, when set, owns every object in Namespace, so that they go with the KubeVirt.
	Owner *metav1.OwnerReference
	// Registry and Version are what the images come from, reported in the KubeVirt's status.
	Registry string
	Version  string
	Images   Images
	// PullPolicy and PullSecrets apply to every pod.
	PullPolicy         corev1.PullPolicy
	PullSecrets        []corev1.LocalObjectReference
	HostMountNamespace string
	// Replicas of virt-api and virt-controller.
	Replicas int32
	// Infra places virt-api and virt-controller, Workloads places virt-handler.
	Infra     *kubevirtv1.NodePlacement
	Workloads *kubevirtv1.NodePlacement
	// Certificates are the lifetimes of the self-signed certificates.
	Certificates certs.Policy
	// Emulation runs guests under TCG, and the node labeller reports what TCG offers, for nodes
	// whose KVM does not work (spec.configuration.developerConfiguration.useEmulation).
	Emulation bool
	// Patches are spec.customizeComponents.patches, applied to the objects built.
	Patches []kubevirtv1.CustomizeComponentsPatch
	// Log is every installed program's log level and format.
	Log logopts.Options
}

// NewInstall resolves what kv asks for against the operator's defaults.
func NewInstall(kv *kubevirtv1.KubeVirt, cfg Config) Install {
	prefix, tag := cfg.ImagePrefix, cfg.ImageTag
	if r := kv.Spec.ImageRegistry; r != "" {
		prefix = strings.TrimSuffix(r, "/") + "/"
	}
	if kv.Spec.ImageTag != "" {
		tag = kv.Spec.ImageTag
	}
	image := func(name string) string { return prefix + name + ":" + tag }
	in := Install{
		Namespace: kv.Namespace,
		Owner: &metav1.OwnerReference{
			APIVersion: kubevirtv1.GroupVersion.String(), Kind: "KubeVirt", Name: kv.Name, UID: kv.UID,
			Controller: ptr(true), BlockOwnerDeletion: ptr(true),
		},
		Registry: strings.TrimSuffix(prefix, "/"),
		Version:  tag,
		Images: Images{
			API: image(APIName), Controller: image(ControllerName), Handler: image(HandlerName),
			Launcher: image("virt-launcher"), Rewriter: cfg.RewriterImage, KubeRBACProxy: cfg.KubeRBACProxyImage,
		},
		PullPolicy:         cfg.ImagePullPolicy,
		PullSecrets:        kv.Spec.ImagePullSecrets,
		HostMountNamespace: cfg.HostMountNamespace,
		Replicas:           cfg.Replicas,
		Certificates:       cfg.Certificates,
		Log:                cfg.Log,
	}
	if in.Images.Rewriter == "" {
		in.Images.Rewriter = image(RewriterName)
	}
	if in.Images.KubeRBACProxy == "" {
		in.Images.KubeRBACProxy = image(KubeRBACProxyName)
	}
	if kv.Spec.ImagePullPolicy != "" {
		in.PullPolicy = kv.Spec.ImagePullPolicy
	}
	if in.Replicas < 1 {
		in.Replicas = 1
	}
	if infra := kv.Spec.Infra; infra != nil {
		in.Infra = infra.NodePlacement
		if infra.Replicas != nil && *infra.Replicas > 0 {
			in.Replicas = int32(*infra.Replicas)
		}
	}
	if cc := kv.Spec.CustomizeComponents; len(cc.Patches) > 0 {
		in.Patches = cc.Patches
	}
	if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil {
		in.Emulation = dc.UseEmulation
	}
	if kv.Spec.Workloads != nil {
		in.Workloads = kv.Spec.Workloads.NodePlacement
	}
	if ss := kv.Spec.CertificateRotationStrategy.SelfSigned; ss != nil {
		if ss.CA != nil {
			in.Certificates.CALifetime = durationOr(ss.CA.Duration, in.Certificates.CALifetime)
			in.Certificates.CARenewBefore = durationOr(ss.CA.RenewBefore, in.Certificates.CARenewBefore)
		}
		if ss.Server != nil {
			in.Certificates.LeafLifetime = durationOr(ss.Server.Duration, in.Certificates.LeafLifetime)
			in.Certificates.LeafRenewBefore = durationOr(ss.Server.RenewBefore, in.Certificates.LeafRenewBefore)
		}
	}
	return in
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

func ptr[T any](v T) *T { return &v }

// deploymentConfig is what an installation's identity is made of: the KubeVirt's
// status.targetDeploymentConfig shows it, and its hash is status.targetDeploymentID. A change
// to any of it is an update.
type deploymentConfig struct {
	ID                   string            `json:"id"`
	Namespace            string            `json:"namespace"`
	Registry             string            `json:"registry"`
	KubeVirtVersion      string            `json:"kubeVirtVersion"`
	AdditionalProperties map[string]string `json:"additionalProperties,omitempty"`
}

// DeploymentConfig returns the JSON of status.targetDeploymentConfig and its ID.
func (in Install) DeploymentConfig() (config, id string) {
	props := map[string]string{
		"apiImage": in.Images.API, "controllerImage": in.Images.Controller, "handlerImage": in.Images.Handler,
		"launcherImage": in.Images.Launcher, "rewriterImage": in.Images.Rewriter, "kubeRBACProxyImage": in.Images.KubeRBACProxy,
		"imagePullPolicy": string(in.PullPolicy),
		"useEmulation":    strconv.FormatBool(in.Emulation),
	}
	for k, v := range map[string]any{"replicas": in.Replicas, "pullSecrets": in.PullSecrets, "infra": in.Infra, "workloads": in.Workloads} {
		b, _ := json.Marshal(v)
		props[k] = string(b)
	}
	c := deploymentConfig{Namespace: in.Namespace, Registry: in.Registry, KubeVirtVersion: in.Version, AdditionalProperties: props}
	// encoding/json sorts map keys, so the hash is stable.
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	c.ID = hex.EncodeToString(sum[:20])
	b, _ = json.Marshal(c)
	return string(b), c.ID
}
