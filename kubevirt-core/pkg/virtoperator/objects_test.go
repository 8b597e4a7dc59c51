package virtoperator

import (
	"encoding/base64"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
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
		"APIService v1.subresources.kubevirt.io",
		"ClusterRole kubevirt-apiserver", "ClusterRole kubevirt-controller", "ClusterRole kubevirt-handler",
		"ClusterRole kubevirt-internal-virtualization-metrics-reader", "ClusterRole kubevirt.io:admin", "ClusterRole kubevirt.io:edit", "ClusterRole kubevirt.io:view",
		"ClusterRoleBinding kubevirt-apiserver", "ClusterRoleBinding kubevirt-controller", "ClusterRoleBinding kubevirt-handler",
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

func podSpec(t *testing.T, ix index, kind, name string) corev1.PodSpec {
	t.Helper()
	switch kind {
	case "Deployment":
		return get[*appsv1.Deployment](t, ix, kind, "kv-ns", name).Spec.Template.Spec
	case "DaemonSet":
		return get[*appsv1.DaemonSet](t, ix, kind, "kv-ns", name).Spec.Template.Spec
	}
	t.Fatalf("no workload kind %s", kind)
	return corev1.PodSpec{}
}

func TestWorkloads(t *testing.T) {
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	tests := []struct {
		kind, name, account string
		args                []string
		rewriterArgs        []string
		certSecrets         []string
		env                 string
	}{
		{
			kind: "Deployment", name: APIName, account: APIServiceAccount,
			args: []string{
				"--kubeconfig=/etc/virt-api/kubeconfig/kubeconfig", "--listen=:8443",
				"--tls-cert-file=/etc/virt-api/certificates/tls.crt", "--tls-key-file=/etc/virt-api/certificates/tls.key",
				"--webhook-listen=127.0.0.1:9443", "--handler-ca-file=/etc/virt-api/handler-certs/ca.crt",
				"--handler-client-cert-file=/etc/virt-api/handler-certs/tls.crt", "--handler-client-key-file=/etc/virt-api/handler-certs/tls.key",
				"--system-users=system:serviceaccount:kv-ns:kubevirt-controller,system:serviceaccount:kv-ns:kubevirt-handler,system:serviceaccount:kv-ns:kubevirt-apiserver",
			},
			rewriterArgs: []string{"--api-listen=127.0.0.1:23915", "--webhook-listen=:24192", "--webhook-target=https://127.0.0.1:9443",
				"--webhook-cert=/etc/kube-api-rewriter/webhook/tls.crt", "--webhook-key=/etc/kube-api-rewriter/webhook/tls.key"},
			certSecrets: []string{APICertSecret, HandlerClientCertSecret},
		},
		{
			kind: "Deployment", name: ControllerName, account: ControllerServiceAccount,
			args: []string{"--kubeconfig=/etc/virt-controller/kubeconfig/kubeconfig", "--leader-elect=true",
				"--leader-election-namespace=kv-ns", "--launcher-image=d8v.local/virt-launcher:dev",
				"--container-disk-store=/var/lib/kubevirt/container-disks", "--metrics-bind-address=127.0.0.1:8080",
				"--health-probe-bind-address=:8081"},
			rewriterArgs: []string{"--api-listen=127.0.0.1:23915"},
		},
		{
			kind: "DaemonSet", name: HandlerName, account: HandlerServiceAccount,
			args: []string{"--kubeconfig=/etc/virt-handler/kubeconfig/kubeconfig", "--pods-dir=/var/lib/kubelet/pods",
				"--listen=:8186", "--tls-cert-file=/etc/virt-handler/certs/tls.crt", "--tls-key-file=/etc/virt-handler/certs/tls.key",
				"--client-ca-file=/etc/virt-handler/certs/ca.crt", "--health-probe-bind-address=:8081",
				"--node-labeller-dir=/var/lib/kubevirt-node-labeller", "--host-mount-namespace=/proc/1/ns/mnt"},
			rewriterArgs: []string{"--api-listen=127.0.0.1:23915"},
			certSecrets:  []string{HandlerServerCertSecret},
			env:          "NODE_NAME",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := podSpec(t, ix, tt.kind, tt.name)
			var sel *metav1.LabelSelector
			var tmpl metav1.ObjectMeta
			if tt.kind == "Deployment" {
				d := get[*appsv1.Deployment](t, ix, tt.kind, "kv-ns", tt.name)
				sel, tmpl = d.Spec.Selector, d.Spec.Template.ObjectMeta
			} else {
				ds := get[*appsv1.DaemonSet](t, ix, tt.kind, "kv-ns", tt.name)
				sel, tmpl = ds.Spec.Selector, ds.Spec.Template.ObjectMeta
			}
			if !equalMaps(sel.MatchLabels, map[string]string{"kubevirt.io": tt.name}) {
				t.Errorf("selector %v", sel.MatchLabels)
			}
			if tmpl.Labels["kubevirt.io"] != tt.name || tmpl.Labels["app.kubernetes.io/managed-by"] != "virt-operator" {
				t.Errorf("template labels %v", tmpl.Labels)
			}
			if spec.ServiceAccountName != tt.account {
				t.Errorf("service account %q", spec.ServiceAccountName)
			}
			if !slices.Equal(containerNames(spec), []string{tt.name, RewriterName, KubeRBACProxyName, RewriterMetricsProxyName}) {
				t.Fatalf("containers %v", containerNames(spec))
			}
			comp, rw := spec.Containers[0], spec.Containers[1]
			if !slices.Equal(comp.Command, []string{tt.name}) || !slices.Equal(rw.Command, []string{RewriterName}) {
				t.Errorf("commands %v %v", comp.Command, rw.Command)
			}
			for _, a := range tt.args {
				if !slices.Contains(comp.Args, a) {
					t.Errorf("%s args %v lack %s", tt.name, comp.Args, a)
				}
			}
			for _, a := range tt.rewriterArgs {
				if !slices.Contains(rw.Args, a) {
					t.Errorf("rewriter args %v lack %s", rw.Args, a)
				}
			}
			if comp.ReadinessProbe == nil || rw.ReadinessProbe == nil || rw.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Error("a container has no readiness probe")
			}
			// Every mount has its volume, and every volume is something Objects makes.
			vols := map[string]corev1.Volume{}
			for _, v := range spec.Volumes {
				vols[v.Name] = v
				switch {
				case v.Secret != nil:
					get[*corev1.Secret](t, ix, "Secret", "kv-ns", v.Secret.SecretName)
				case v.ConfigMap != nil:
					cm := get[*corev1.ConfigMap](t, ix, "ConfigMap", "kv-ns", v.ConfigMap.Name)
					if !strings.Contains(cm.Data["kubeconfig"], "http://127.0.0.1:23915") {
						t.Errorf("kubeconfig %q does not point at the sidecar", cm.Data["kubeconfig"])
					}
				}
			}
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				for _, m := range c.VolumeMounts {
					if _, ok := vols[m.Name]; !ok {
						t.Errorf("container %s mounts missing volume %s", c.Name, m.Name)
					}
				}
			}
			if tmpl.Annotations[CertificatesHashAnnotation] == "" && len(tt.certSecrets) > 0 {
				t.Error("no certificates hash on the template")
			}
			if tt.env != "" && (len(comp.Env) == 0 || comp.Env[0].Name != tt.env || comp.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName") {
				t.Errorf("env %+v", comp.Env)
			}
			if spec.NodeSelector[corev1.LabelOSStable] != "linux" {
				t.Errorf("node selector %v", spec.NodeSelector)
			}
		})
	}

	ds := get[*appsv1.DaemonSet](t, ix, "DaemonSet", "kv-ns", HandlerName)
	if !ds.Spec.Template.Spec.HostPID {
		t.Error("the handler does not see the node's processes: its --host-mount-namespace needs hostPID")
	}
	hp := ds.Spec.Template.Spec.Volumes[0]
	if hp.HostPath == nil || hp.HostPath.Path != "/var/lib/kubelet/pods" {
		t.Errorf("handler's first volume %+v is not the kubelet's pods directory", hp)
	}
	// The node labeller's init container writes into the emptyDir the handler reads.
	inits := ds.Spec.Template.Spec.InitContainers
	if len(inits) != 1 || inits[0].Image != "d8v.local/virt-launcher:dev" ||
		!slices.Equal(inits[0].Args, []string{"--node-labeller-dir=/var/lib/kubevirt-node-labeller"}) ||
		len(inits[0].VolumeMounts) != 1 || inits[0].VolumeMounts[0].Name != "node-labeller" {
		t.Errorf("handler's init containers %+v", inits)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "node-labeller" && v.EmptyDir == nil {
			t.Errorf("node-labeller volume %+v is not an emptyDir", v)
		}
	}
}

func containerNames(spec corev1.PodSpec) []string {
	var out []string
	for _, c := range spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestServices(t *testing.T) {
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	tests := []struct {
		name, port string
		container  string
	}{
		{APIService, "virt-api", APIName},
		{WebhookService, "webhooks", RewriterName},
	}
	api := get[*appsv1.Deployment](t, ix, "Deployment", "kv-ns", APIName)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := get[*corev1.Service](t, ix, "Service", "kv-ns", tt.name)
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(api.Spec.Template.Labels)) {
				t.Errorf("selector %v misses virt-api's pods", svc.Spec.Selector)
			}
			p := svc.Spec.Ports[0]
			if p.Port != 443 || p.TargetPort.StrVal != tt.port {
				t.Errorf("port %+v", p)
			}
			found := false
			for _, c := range api.Spec.Template.Spec.Containers {
				for _, cp := range c.Ports {
					found = found || (c.Name == tt.container && cp.Name == tt.port)
				}
			}
			if !found {
				t.Errorf("no container port %s in %s", tt.port, tt.container)
			}
		})
	}
}

func TestAdmission(t *testing.T) {
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	served := map[string]bool{}
	for _, p := range []string{virtapicontract.PathVMICreate, virtapicontract.PathVMIUpdate, virtapicontract.PathVM, virtapicontract.PathVMIRS,
		virtapicontract.PathMigration, virtapicontract.PathPreset, virtapicontract.PathVMIMutate, virtapicontract.PathVMMutate} {
		served[p] = true
	}
	check := func(name string, cc admissionregistrationv1.WebhookClientConfig, rules []admissionregistrationv1.RuleWithOperations, fp *admissionregistrationv1.FailurePolicyType) {
		s := cc.Service
		if s == nil || s.Name != WebhookService || s.Namespace != "kv-ns" || *s.Port != 443 || !served[*s.Path] {
			t.Errorf("%s client config %+v", name, s)
		} else {
			delete(served, *s.Path)
		}
		if string(cc.CABundle) != string(testCerts.Bundle) {
			t.Errorf("%s has another CA bundle", name)
		}
		if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, []string{"kubevirt.io"}) || len(rules[0].Resources) != 1 {
			t.Errorf("%s rules %+v", name, rules)
		}
		if *fp != admissionregistrationv1.Fail {
			t.Errorf("%s fails open", name)
		}
	}
	for _, w := range get[*admissionregistrationv1.ValidatingWebhookConfiguration](t, ix, "ValidatingWebhookConfiguration", "", ValidatingWebhooks).Webhooks {
		check(w.Name, w.ClientConfig, w.Rules, w.FailurePolicy)
	}
	for _, w := range get[*admissionregistrationv1.MutatingWebhookConfiguration](t, ix, "MutatingWebhookConfiguration", "", MutatingWebhooks).Webhooks {
		check(w.Name, w.ClientConfig, w.Rules, w.FailurePolicy)
	}
	if len(served) != 0 {
		t.Errorf("paths virt-api serves without a webhook: %v", served)
	}

	svc := get[*unstructured.Unstructured](t, ix, "APIService", "", SubresourcesAPIService)
	spec, _, _ := unstructured.NestedMap(svc.Object, "spec")
	ca, _ := base64.StdEncoding.DecodeString(spec["caBundle"].(string))
	ref := spec["service"].(map[string]any)
	if spec["group"] != "subresources.kubevirt.io" || spec["version"] != "v1" || ref["name"] != APIService || ref["namespace"] != "kv-ns" ||
		string(ca) != string(testCerts.Bundle) || svc.GetAPIVersion() != "apiregistration.k8s.io/v1" {
		t.Errorf("APIService %v", svc.Object)
	}
}

// allowed says whether rules grant verb on group/resource.
func allowed(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

type access struct{ group, resource, verb string }

func TestRBAC(t *testing.T) {
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	tests := []struct {
		role    string
		must    []access
		mustNot []access
	}{
		{role: ControllerServiceAccount,
			must: []access{
				{"kubevirt.io", "virtualmachines", "watch"}, {"kubevirt.io", "virtualmachines", "patch"},
				{"kubevirt.io", "virtualmachines/status", "update"}, {"kubevirt.io", "virtualmachineinstances", "create"},
				{"kubevirt.io", "virtualmachineinstances", "update"}, {"kubevirt.io", "virtualmachineinstances", "delete"},
				{"kubevirt.io", "virtualmachineinstancereplicasets/status", "update"},
				{"kubevirt.io", "virtualmachineinstancemigrations/status", "update"}, {"kubevirt.io", "virtualmachineinstancemigrations", "patch"},
				{"", "pods", "create"}, {"", "pods", "delete"}, {"", "pods", "watch"}, {"", "nodes", "patch"},
				{"", "persistentvolumeclaims", "get"},
			},
			mustNot: []access{{"", "secrets", "get"}, {"kubevirt.io", "kubevirts", "update"}, {"", "nodes", "delete"},
				{"", "persistentvolumeclaims", "update"}},
		},
		{role: HandlerServiceAccount,
			must: []access{
				{"kubevirt.io", "virtualmachineinstances", "watch"}, {"kubevirt.io", "virtualmachineinstances", "update"},
				{"", "pods", "list"}, {"", "pods/status", "patch"}, {"", "nodes", "patch"}, {"", "nodes", "get"},
			},
			mustNot: []access{{"kubevirt.io", "virtualmachineinstances", "delete"}, {"", "pods", "create"}, {"", "secrets", "get"}},
		},
		{role: APIServiceAccount,
			must: []access{
				{"kubevirt.io", "virtualmachines", "patch"}, {"kubevirt.io", "virtualmachines/status", "patch"},
				{"kubevirt.io", "virtualmachineinstances", "get"}, {"kubevirt.io", "virtualmachineinstancepresets", "list"},
				{"", "pods", "list"}, {"", "pods", "delete"}, {"authorization.k8s.io", "subjectaccessreviews", "create"},
			},
			mustNot: []access{{"kubevirt.io", "virtualmachines", "delete"}, {"", "pods", "create"}},
		},
		{role: "kubevirt.io:edit",
			must: []access{
				{"kubevirt.io", "virtualmachines", "create"}, {"subresources.kubevirt.io", "virtualmachines/start", "update"},
				{"subresources.kubevirt.io", "virtualmachineinstances/console", "get"}, {"subresources.kubevirt.io", "virtualmachineinstances/pause", "update"},
			},
		},
		{role: "kubevirt.io:view",
			must:    []access{{"kubevirt.io", "virtualmachines", "list"}, {"subresources.kubevirt.io", "virtualmachineinstances/guestosinfo", "get"}},
			mustNot: []access{{"kubevirt.io", "virtualmachines", "create"}, {"subresources.kubevirt.io", "virtualmachineinstances/console", "get"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			role := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", tt.role)
			for _, r := range role.Rules {
				// One group per rule: the rewriter renames a rule's resources by its groups.
				if len(r.APIGroups) != 1 {
					t.Errorf("rule %+v names %d groups", r, len(r.APIGroups))
				}
				if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") {
					t.Errorf("wildcard rule %+v", r)
				}
			}
			for _, a := range tt.must {
				if !allowed(role.Rules, a.group, a.resource, a.verb) {
					t.Errorf("%s cannot %s %s in %q", tt.role, a.verb, a.resource, a.group)
				}
			}
			for _, a := range tt.mustNot {
				if allowed(role.Rules, a.group, a.resource, a.verb) {
					t.Errorf("%s may %s %s in %q", tt.role, a.verb, a.resource, a.group)
				}
			}
		})
	}
	for _, agg := range []string{"admin", "edit", "view"} {
		role := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", "kubevirt.io:"+agg)
		if role.Labels["rbac.authorization.k8s.io/aggregate-to-"+agg] != "true" {
			t.Errorf("kubevirt.io:%s labels %v", agg, role.Labels)
		}
	}
	// Every binding names a role that exists (or a built-in one) and an account Objects makes.
	for _, o := range ix {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", b.RoleRef.Name)
			get[*corev1.ServiceAccount](t, ix, "ServiceAccount", b.Subjects[0].Namespace, b.Subjects[0].Name)
		case *rbacv1.RoleBinding:
			if b.RoleRef.Name != "extension-apiserver-authentication-reader" {
				get[*rbacv1.Role](t, ix, "Role", b.Namespace, b.RoleRef.Name)
			}
			get[*corev1.ServiceAccount](t, ix, "ServiceAccount", b.Subjects[0].Namespace, b.Subjects[0].Name)
		}
	}
	ns := get[*rbacv1.Role](t, ix, "Role", "kv-ns", ControllerServiceAccount)
	if !allowed(ns.Rules, "coordination.k8s.io", "leases", "update") {
		t.Error("virt-controller cannot hold its leader lease")
	}
}

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

func TestOperatorRules(t *testing.T) {
	op := OperatorRules()
	// It may apply, list, watch and delete every kind it makes.
	gvr := map[string]access{
		"ValidatingWebhookConfiguration": {"admissionregistration.k8s.io", "validatingwebhookconfigurations", ""},
		"MutatingWebhookConfiguration":   {"admissionregistration.k8s.io", "mutatingwebhookconfigurations", ""},
		"APIService":                     {"apiregistration.k8s.io", "apiservices", ""},
		"DaemonSet":                      {"apps", "daemonsets", ""}, "Deployment": {"apps", "deployments", ""},
		"Service": {"", "services", ""}, "ServiceAccount": {"", "serviceaccounts", ""},
		"Secret": {"", "secrets", ""}, "ConfigMap": {"", "configmaps", ""},
		"ClusterRoleBinding": {"rbac.authorization.k8s.io", "clusterrolebindings", ""}, "RoleBinding": {"rbac.authorization.k8s.io", "rolebindings", ""},
		"ClusterRole": {"rbac.authorization.k8s.io", "clusterroles", ""}, "Role": {"rbac.authorization.k8s.io", "roles", ""},
	}
	for _, k := range managedKinds {
		a, ok := gvr[k.kind]
		if !ok {
			t.Errorf("no resource known for %s", k.kind)
			continue
		}
		for _, verb := range []string{"get", "list", "watch", "create", "patch", "delete"} {
			if !allowed(op, a.group, a.resource, verb) {
				t.Errorf("operator cannot %s %s", verb, a.resource)
			}
		}
	}
	// It holds every permission it grants, so the apiserver lets it grant them.
	for _, o := range Objects(testKV(), testConfig(), testCerts) {
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules = r.Rules
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if !allowed(op, g, res, v) {
							t.Errorf("%s grants %s %s/%s, which the operator does not hold", o.GetName(), v, g, res)
						}
					}
				}
			}
		}
	}
	for _, a := range []access{{"kubevirt.io", "kubevirts/status", "patch"}, {"kubevirt.io", "kubevirts/finalizers", "update"}, {"coordination.k8s.io", "leases", "update"}} {
		if !allowed(op, a.group, a.resource, a.verb) {
			t.Errorf("operator cannot %s %s", a.verb, a.resource)
		}
	}
}
