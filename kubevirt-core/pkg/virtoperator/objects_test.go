package virtoperator

import (
	"slices"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

func testKV() *kubevirtv1.KubeVirt {
	return &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kv-ns", Name: "kubevirt", UID: "kv-uid", Generation: 3}}
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ImagePrefix, cfg.ImageTag = "d8v.local/", "dev"
	return cfg
}

var testCerts = func() Certs {
	c, _, err := certs.Ensure(Certs{}, NewInstall(testKV(), testConfig()).CertSpec(), time.Now())
	if err != nil {
		panic(err)
	}
	return c
}()

// index finds the built objects by kind and name.
type index map[string]client.Object

func indexOf(objs []client.Object) index {
	out := index{}
	for _, o := range objs {
		out[objectKey(kindOf(o), o.GetNamespace(), o.GetName())] = o
	}
	return out
}

func get[T client.Object](t *testing.T, ix index, kind, ns, name string) T {
	t.Helper()
	o, ok := ix[objectKey(kind, ns, name)]
	if !ok {
		t.Fatalf("no %s", objectKey(kind, ns, name))
	}
	typed, ok := o.(T)
	if !ok {
		t.Fatalf("%s is a %T", objectKey(kind, ns, name), o)
	}
	return typed
}

func TestObjectsInventory(t *testing.T) {
	objs := Objects(testKV(), testConfig(), testCerts)
	var got []string
	for _, o := range objs {
		got = append(got, objectKey(kindOf(o), o.GetNamespace(), o.GetName()))
	}
	want := []string{
		"APIService v1.subresources.kubevirt.io", "APIService v1alpha3.subresources.kubevirt.io",
		"ClusterRole kubevirt-apiserver", "ClusterRole kubevirt-controller", "ClusterRole kubevirt-handler",
		"ClusterRole kubevirt-internal-virtualization-metrics-reader", "ClusterRole kubevirt.io:admin", "ClusterRole kubevirt.io:default", "ClusterRole kubevirt.io:edit", "ClusterRole kubevirt.io:view",
		"ClusterRoleBinding kubevirt-apiserver", "ClusterRoleBinding kubevirt-controller", "ClusterRoleBinding kubevirt-handler", "ClusterRoleBinding kubevirt.io:default",
		"ConfigMap kv-ns/kube-api-rewriter-kubeconfig",
		"DaemonSet kv-ns/virt-handler",
		"Deployment kv-ns/virt-api", "Deployment kv-ns/virt-controller",
		"MutatingWebhookConfiguration virt-api-mutator",
		"Role kv-ns/kubevirt-controller",
		"RoleBinding kube-system/kubevirt-apiserver-auth-reader", "RoleBinding kv-ns/kubevirt-controller",
		"Secret kv-ns/kubevirt-ca", "Secret kv-ns/kubevirt-virt-api-certs", "Secret kv-ns/kubevirt-virt-api-metrics-certs",
		"Secret kv-ns/kubevirt-virt-controller-metrics-certs", "Secret kv-ns/kubevirt-virt-handler-certs",
		"Secret kv-ns/kubevirt-virt-handler-metrics-certs", "Secret kv-ns/kubevirt-virt-handler-server-certs",
		"Service kv-ns/virt-api", "Service kv-ns/virt-api-metrics", "Service kv-ns/virt-api-webhooks",
		"Service kv-ns/virt-controller-metrics", "Service kv-ns/virt-handler-metrics",
		"ServiceAccount kv-ns/kubevirt-apiserver", "ServiceAccount kv-ns/kubevirt-controller", "ServiceAccount kv-ns/kubevirt-handler",
		"ValidatingWebhookConfiguration virt-api-validator",
	}
	sorted := slices.Clone(got)
	sort.Strings(sorted)
	if !slices.Equal(sorted, want) {
		t.Errorf("objects:\n got %v\nwant %v", sorted, want)
	}
	// What pods mount comes before the pods, the traffic to virt-api after them.
	pos := func(key string) int { return slices.Index(got, key) }
	for _, before := range []string{"Secret kv-ns/kubevirt-virt-api-certs", "ServiceAccount kv-ns/kubevirt-apiserver", "ClusterRoleBinding kubevirt-apiserver"} {
		if pos(before) > pos("Deployment kv-ns/virt-api") {
			t.Errorf("%s is applied after virt-api's Deployment", before)
		}
	}
	if pos("ValidatingWebhookConfiguration virt-api-validator") < pos("Deployment kv-ns/virt-api") {
		t.Error("webhooks are applied before virt-api")
	}
}

func TestObjectsMetadata(t *testing.T) {
	kv := testKV()
	for _, o := range Objects(kv, testConfig(), testCerts) {
		key := objectKey(kindOf(o), o.GetNamespace(), o.GetName())
		if !labels.SelectorFromSet(ManagedLabels()).Matches(labels.Set(o.GetLabels())) {
			t.Errorf("%s lacks the managed labels: %v", key, o.GetLabels())
		}
		refs := o.GetOwnerReferences()
		switch o.GetNamespace() {
		case kv.Namespace:
			if len(refs) != 1 || refs[0].UID != kv.UID || refs[0].Kind != "KubeVirt" || refs[0].APIVersion != "kubevirt.io/v1" || !*refs[0].Controller {
				t.Errorf("%s owner references %+v", key, refs)
			}
		default:
			// Cluster-scoped, or in kube-system: the finalizer cleans them up.
			if len(refs) != 0 {
				t.Errorf("%s outside the KubeVirt's namespace has owners %+v", key, refs)
			}
		}
	}
}

func TestImages(t *testing.T) {
	tests := []struct {
		name     string
		spec     kubevirtv1.KubeVirtSpec
		cfg      func(*Config)
		want     Images
		registry string
		version  string
	}{
		{
			name: "operator defaults",
			want: Images{API: "d8v.local/virt-api:dev", Controller: "d8v.local/virt-controller:dev", Handler: "d8v.local/virt-handler:dev",
				Launcher: "d8v.local/virt-launcher:dev", Rewriter: "d8v.local/kube-api-rewriter:dev", KubeRBACProxy: "d8v.local/kube-rbac-proxy:dev"},
			registry: "d8v.local", version: "dev",
		},
		{
			name: "registry and tag of the KubeVirt",
			spec: kubevirtv1.KubeVirtSpec{ImageRegistry: "registry.example.com/kv/", ImageTag: "v1.6.0"},
			want: Images{API: "registry.example.com/kv/virt-api:v1.6.0", Controller: "registry.example.com/kv/virt-controller:v1.6.0",
				Handler: "registry.example.com/kv/virt-handler:v1.6.0", Launcher: "registry.example.com/kv/virt-launcher:v1.6.0",
				Rewriter: "registry.example.com/kv/kube-api-rewriter:v1.6.0", KubeRBACProxy: "registry.example.com/kv/kube-rbac-proxy:v1.6.0"},
			registry: "registry.example.com/kv", version: "v1.6.0",
		},
		{
			name: "fixed rewriter image",
			cfg:  func(c *Config) { c.RewriterImage = "rw.example.com/rewriter:1" },
			want: Images{API: "d8v.local/virt-api:dev", Controller: "d8v.local/virt-controller:dev", Handler: "d8v.local/virt-handler:dev",
				Launcher: "d8v.local/virt-launcher:dev", Rewriter: "rw.example.com/rewriter:1", KubeRBACProxy: "d8v.local/kube-rbac-proxy:dev"},
			registry: "d8v.local", version: "dev",
		},
		{
			name: "fixed kube-rbac-proxy image",
			cfg:  func(c *Config) { c.KubeRBACProxyImage = "quay.io/brancz/kube-rbac-proxy:v0.19.1" },
			want: Images{API: "d8v.local/virt-api:dev", Controller: "d8v.local/virt-controller:dev", Handler: "d8v.local/virt-handler:dev",
				Launcher: "d8v.local/virt-launcher:dev", Rewriter: "d8v.local/kube-api-rewriter:dev", KubeRBACProxy: "quay.io/brancz/kube-rbac-proxy:v0.19.1"},
			registry: "d8v.local", version: "dev",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := testKV()
			kv.Spec = tt.spec
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			in := NewInstall(kv, cfg)
			if in.Images != tt.want || in.Registry != tt.registry || in.Version != tt.version {
				t.Errorf("got %+v %q %q, want %+v %q %q", in.Images, in.Registry, in.Version, tt.want, tt.registry, tt.version)
			}
			ix := indexOf(in.Objects(testCerts))
			images := map[string]string{}
			for _, w := range []struct{ kind, name string }{{"Deployment", APIName}, {"Deployment", ControllerName}, {"DaemonSet", HandlerName}} {
				for _, c := range podSpec(t, ix, w.kind, w.name).Containers {
					images[c.Name] = c.Image
				}
			}
			if images[APIName] != tt.want.API || images[ControllerName] != tt.want.Controller ||
				images[HandlerName] != tt.want.Handler || images[RewriterName] != tt.want.Rewriter ||
				images[KubeRBACProxyName] != tt.want.KubeRBACProxy || images[RewriterMetricsProxyName] != tt.want.KubeRBACProxy {
				t.Errorf("container images %v", images)
			}
			ctrl := podSpec(t, ix, "Deployment", ControllerName).Containers[0]
			if !slices.Contains(ctrl.Args, "--launcher-image="+tt.want.Launcher) {
				t.Errorf("virt-controller args %v lack the launcher image", ctrl.Args)
			}
		})
	}
}

type access struct{ group, resource, verb string }

func TestCertificateSecrets(t *testing.T) {
	objs := Objects(testKV(), testConfig(), testCerts)
	var secrets []corev1.Secret
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok {
			if string(s.Data["ca.crt"]) != string(testCerts.Bundle) || s.Type != corev1.SecretTypeTLS {
				t.Errorf("secret %s: type %s, bundle differs", s.Name, s.Type)
			}
			secrets = append(secrets, *s)
		}
	}
	back := CertsFromSecrets(secrets)
	if renew, _ := certs.Check(back, NewInstall(testKV(), testConfig()).CertSpec(), time.Now()); len(renew) != 0 {
		t.Errorf("certificates read back from the Secrets need %v", renew)
	}
	// virt-api's certificate answers for both of its Services.
	leaf := NewInstall(testKV(), testConfig()).CertSpec().Leaves[APICertSecret]
	for _, name := range []string{"virt-api.kv-ns.svc", "virt-api-webhooks.kv-ns.svc"} {
		if !slices.Contains(leaf.DNSNames, name) {
			t.Errorf("virt-api's certificate lacks %s", name)
		}
	}
}

func TestInstallFromKubeVirt(t *testing.T) {
	three, zero := uint8(3), uint8(0)
	tests := []struct {
		name  string
		spec  kubevirtv1.KubeVirtSpec
		check func(t *testing.T, in Install, ix index)
	}{
		{name: "defaults", check: func(t *testing.T, in Install, ix index) {
			if in.Replicas != 2 || in.PullPolicy != corev1.PullIfNotPresent {
				t.Errorf("replicas %d pull policy %s", in.Replicas, in.PullPolicy)
			}
			d := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", APIName)
			if d.Spec.Template.Spec.Affinity == nil || d.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
				t.Error("replicas are not spread over nodes")
			}
		}},
		{name: "infra replicas and placement", spec: kubevirtv1.KubeVirtSpec{
			Infra: &kubevirtv1.ComponentConfig{Replicas: &three, NodePlacement: &kubevirtv1.NodePlacement{
				NodeSelector: map[string]string{"role": "infra"},
				Tolerations:  []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists}},
			}},
			Workloads:       &kubevirtv1.ComponentConfig{NodePlacement: &kubevirtv1.NodePlacement{NodeSelector: map[string]string{"role": "vms"}}},
			ImagePullPolicy: corev1.PullAlways,
		}, check: func(t *testing.T, in Install, ix index) {
			for _, name := range []string{APIName, ControllerName} {
				d := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", name)
				spec := d.Spec.Template.Spec
				if *d.Spec.Replicas != 3 || spec.NodeSelector["role"] != "infra" || len(spec.Tolerations) != 1 ||
					spec.Containers[0].ImagePullPolicy != corev1.PullAlways {
					t.Errorf("%s: replicas %d selector %v tolerations %v", name, *d.Spec.Replicas, spec.NodeSelector, spec.Tolerations)
				}
			}
			ds := get[*appsv1.DaemonSet](t, ix, "DaemonSet", "kv-ns", HandlerName).Spec.Template.Spec
			if ds.NodeSelector["role"] != "vms" || ds.NodeSelector[corev1.LabelOSStable] != "linux" {
				t.Errorf("handler node selector %v", ds.NodeSelector)
			}
		}},
		{name: "zero replicas mean the default", spec: kubevirtv1.KubeVirtSpec{Infra: &kubevirtv1.ComponentConfig{Replicas: &zero}},
			check: func(t *testing.T, in Install, _ index) {
				if in.Replicas != 2 {
					t.Errorf("replicas %d", in.Replicas)
				}
			}},
		{name: "emulation", spec: kubevirtv1.KubeVirtSpec{Configuration: kubevirtv1.KubeVirtConfiguration{
			DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{UseEmulation: true},
		}}, check: func(t *testing.T, in Install, ix index) {
			ctrl := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", ControllerName).Spec.Template.Spec.Containers[0]
			if !slices.Contains(ctrl.Args, "--use-emulation") {
				t.Errorf("virt-controller args %v lack --use-emulation", ctrl.Args)
			}
			labeller := get[*appsv1.DaemonSet](t, ix, "DaemonSet", "kv-ns", HandlerName).Spec.Template.Spec.InitContainers[0]
			if !slices.Contains(labeller.Args, "--emulation") {
				t.Errorf("node labeller args %v lack --emulation", labeller.Args)
			}
			if _, id := in.DeploymentConfig(); id == func() string { _, id := NewInstall(testKV(), testConfig()).DeploymentConfig(); return id }() {
				t.Error("turning emulation on does not change the deployment ID")
			}
		}},
		{name: "no emulation by default", check: func(t *testing.T, _ Install, ix index) {
			ctrl := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", ControllerName).Spec.Template.Spec.Containers[0]
			labeller := get[*appsv1.DaemonSet](t, ix, "DaemonSet", "kv-ns", HandlerName).Spec.Template.Spec.InitContainers[0]
			if slices.Contains(ctrl.Args, "--use-emulation") || slices.Contains(labeller.Args, "--emulation") {
				t.Errorf("emulation without useEmulation: %v %v", ctrl.Args, labeller.Args)
			}
		}},
		{name: "certificate lifetimes", spec: kubevirtv1.KubeVirtSpec{CertificateRotationStrategy: kubevirtv1.KubeVirtCertificateRotateStrategy{
			SelfSigned: &kubevirtv1.KubeVirtSelfSignConfiguration{
				CA:     &kubevirtv1.CertConfig{Duration: &metav1.Duration{Duration: 48 * time.Hour}},
				Server: &kubevirtv1.CertConfig{Duration: &metav1.Duration{Duration: 24 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 2 * time.Hour}},
			},
		}}, check: func(t *testing.T, in Install, _ index) {
			want := certs.Policy{CALifetime: 48 * time.Hour, LeafLifetime: 24 * time.Hour, LeafRenewBefore: 2 * time.Hour}
			if in.Certificates != want {
				t.Errorf("certificates %+v", in.Certificates)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := testKV()
			kv.Spec = tt.spec
			in := NewInstall(kv, testConfig())
			tt.check(t, in, indexOf(in.Objects(testCerts)))
		})
	}
}

func TestDeploymentID(t *testing.T) {
	base := NewInstall(testKV(), testConfig())
	_, id := base.DeploymentConfig()
	_, again := NewInstall(testKV(), testConfig()).DeploymentConfig()
	if id != again || len(id) != 40 {
		t.Fatalf("unstable or odd id %q %q", id, again)
	}
	kv := testKV()
	kv.Spec.ImageTag = "v2"
	if _, other := NewInstall(kv, testConfig()).DeploymentConfig(); other == id {
		t.Error("a new tag keeps the deployment id")
	}
	cfg := testConfig()
	cfg.KubeRBACProxyImage = "quay.io/brancz/kube-rbac-proxy:v0.19.1"
	if _, other := NewInstall(testKV(), cfg).DeploymentConfig(); other == id {
		t.Error("a new kube-rbac-proxy image keeps the deployment id")
	}
}

func TestToApply(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	u, err := ToApply(ix[objectKey("Deployment", "kv-ns", APIName)], scheme)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "Deployment" || u.GetAPIVersion() != "apps/v1" {
		t.Errorf("kind %s %s", u.GetAPIVersion(), u.GetKind())
	}
	if _, ok := u.Object["status"]; ok {
		t.Error("status is applied")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "metadata", "creationTimestamp"); found {
		t.Error("a null creationTimestamp is applied")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "creationTimestamp"); found {
		t.Error("a null creationTimestamp is applied")
	}
}
