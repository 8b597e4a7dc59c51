package virtoperator

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
	"github.com/d8virt/logopts"
)

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
				"--namespace=kv-ns",
			},
			rewriterArgs: []string{"--api-listen=127.0.0.1:23915", "--webhook-listen=:24192", "--webhook-target=https://127.0.0.1:9443",
				"--webhook-cert=/etc/kube-api-rewriter/webhook/tls.crt", "--webhook-key=/etc/kube-api-rewriter/webhook/tls.key"},
			certSecrets: []string{APICertSecret, HandlerClientCertSecret},
		},
		{
			kind: "Deployment", name: ControllerName, account: ControllerServiceAccount,
			args: []string{"--kubeconfig=/etc/virt-controller/kubeconfig/kubeconfig", "--leader-elect=true",
				"--leader-election-namespace=kv-ns", "--launcher-image=d8v.local/virt-launcher:dev",
				"--metrics-bind-address=127.0.0.1:8080",
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
	// The node labeller's init container writes into the emptyDir the handler reads, and leaves
	// its libvirtd's QEMU capabilities in the node's directory for the launchers.
	inits := ds.Spec.Template.Spec.InitContainers
	if len(inits) != 1 || inits[0].Image != "d8v.local/virt-launcher:dev" ||
		!slices.Equal(inits[0].Args, []string{"--node-labeller-dir=/var/lib/kubevirt-node-labeller", "--qemu-capabilities-dir=/var/lib/kubevirt-qemu-capabilities", "--log-level=info", "--log-format=json"}) ||
		len(inits[0].VolumeMounts) != 2 || inits[0].VolumeMounts[0].Name != "node-labeller" ||
		inits[0].VolumeMounts[1].Name != "qemu-capabilities" || inits[0].VolumeMounts[1].MountPath != "/var/lib/kubevirt-qemu-capabilities" {
		t.Errorf("handler's init containers %+v", inits)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "node-labeller" && v.EmptyDir == nil {
			t.Errorf("node-labeller volume %+v is not an emptyDir", v)
		}
		if v.Name == "qemu-capabilities" && (v.HostPath == nil || v.HostPath.Path != "/var/lib/d8-virtualization/qemu-capabilities") {
			t.Errorf("qemu-capabilities volume %+v is not the node's directory", v)
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

// TestLogOptionsReachEveryProgram: the operator's log level and format (the chart's logLevel and
// logFormat) go to every program it installs: the components, their rewriter sidecars and the
// node labeller; virt-controller passes them on to the launchers. The kube-rbac-proxies are
// upstream's, with their own flags.
func TestLogOptionsReachEveryProgram(t *testing.T) {
	cfg := testConfig()
	cfg.Log = logopts.Options{Level: "debug", Format: "text"}
	ix := indexOf(Objects(testKV(), cfg, testCerts))
	want := []string{"--log-level=debug", "--log-format=text"}
	for _, w := range []struct{ kind, name string }{{"Deployment", APIName}, {"Deployment", ControllerName}, {"DaemonSet", HandlerName}} {
		spec := podSpec(t, ix, w.kind, w.name)
		seen := 0
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			if strings.HasPrefix(c.Name, KubeRBACProxyName) {
				continue
			}
			seen++
			for _, a := range want {
				if !slices.Contains(c.Args, a) {
					t.Errorf("%s container %s: no %s in %q", w.name, c.Name, a, c.Args)
				}
			}
		}
		// The component and its rewriter at least.
		if seen < 2 {
			t.Errorf("%s: only %d containers of ours", w.name, seen)
		}
	}
}
