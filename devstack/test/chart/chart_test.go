package chart

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/devstack/test/chart/chartsrc"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// The chart's copies of the CRDs and of the operator's rules are what make chart-sync writes.
func TestGeneratedFilesUpToDate(t *testing.T) {
	t.Parallel()
	stale, err := chartsrc.Stale(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 {
		t.Fatalf("stale generated files in the chart (run make chart-sync):\n  %s", strings.Join(stale, "\n  "))
	}
}

func TestLint(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"default": nil,
		"custom":  {"-f", testdata(t, "values-custom.yaml")},
		// The cert-manager variant, with and without an issuer of the platform.
		"cert-manager":        {"--set", "certManager.enabled=true"},
		"cert-manager-issuer": {"--set", "certManager.enabled=true,certManager.issuerRef.name=platform-ca"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			all := append([]string{"lint", "--strict", chartDir(t), "--namespace", namespace}, args...)
			if out, err := helm(t, all...); err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(all, " "), err, out)
			}
		})
	}
}

// A bad value fails the render with a message that names the value.
func TestSchemaRejectsBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, field string }{
		{"logLevel=loud", "/logLevel"},
		{"logFormat=xml", "/logFormat"},
		{"images.pullPolicy=Sometimes", "/images/pullPolicy"},
		{"virtualMachineCIDRs={10.0.0.0/33}", "/virtualMachineCIDRs/0"},
		{"uploaderServiceType=LoadBalancer", "/uploaderServiceType"},
		{"replicas.core=0", "/replicas/core"},
		{"dvcr.storage.type=Ceph", "/dvcr/storage/type"},
		{"dvcr.storage.persistentVolumeClaim.size=lots", "/dvcr/storage/persistentVolumeClaim/size"},
		{"dvcr.storage.hostPath.path=var/lib/dvcr", "/dvcr/storage/hostPath/path"},
		{"dvcr.storage.emptyDir.sizeLimit=big", "/dvcr/storage/emptyDir/sizeLimit"},
		{"images.dvcr.registry=x", "/images/dvcr"},
		{"featureGates={not-a-gate}", "/featureGates/0"},
		{"nodePlacement.system.tolerations[0].operator=Maybe", "/nodePlacement/system/tolerations/0/operator"},
		{"priorityClass.value=2000000000", "/priorityClass/value"},
		{"monitoring.scrapers[0].kind=ServiceAccount,monitoring.scrapers[0].name=prometheus", "/monitoring/scrapers/0"},
		{"logLvel=debug", "logLvel"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", release, chartDir(t), "--namespace", namespace, "--set", tc.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want a schema error", tc.set)
			}
			if !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, tc.field) {
				t.Fatalf("--set %s: want a schema error naming %s, got:\n%s", tc.set, tc.field, out)
			}
		})
	}
}

// The non-default values reach the objects they configure.
func TestValuesReachTheObjects(t *testing.T) {
	t.Parallel()
	objs := renders(t)["custom"]
	dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", "virt-operator"))
	if got := *dep.Spec.Replicas; got != 1 {
		t.Errorf("virt-operator replicas %d, want 1", got)
	}
	spec := dep.Spec.Template.Spec
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	if spec.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(spec.Tolerations) != 1 {
		t.Errorf("node placement not applied: %v %v", spec.NodeSelector, spec.Tolerations)
	}
	op := container(t, spec, "virt-operator")
	for _, want := range []string{"--log-level=debug", "--log-format=text", "--image-prefix=registry.example.org/virt/",
		"--image-tag=v0.2.0", "--image-pull-policy=Always", "--rewriter-image=registry.example.org/virt/kube-api-rewriter:v0.2.0"} {
		if !slices.Contains(op.Args, want) {
			t.Errorf("virt-operator args %v lack %s", op.Args, want)
		}
	}
	if op.Image != "mirror.example.org/virt/virt-operator:v0.2.1" {
		t.Errorf("virt-operator image %s", op.Image)
	}
	if rw := container(t, spec, "kube-api-rewriter"); !slices.Contains(rw.Args, "--log-level=debug") || !slices.Contains(rw.Args, "--log-format=text") {
		t.Errorf("rewriter args %v", rw.Args)
	}
	if krp := container(t, spec, "kube-rbac-proxy"); krp.Image != "registry.example.org/virt/kube-rbac-proxy:v0.19.1" {
		t.Errorf("kube-rbac-proxy image %s", krp.Image)
	}
	// The module's own programs take the same log options (virtualization-controller passes
	// them on to its importer Pods).
	for _, name := range []string{"virtualization-controller", "virtualization-api"} {
		spec := into[appsv1.Deployment](t, find(t, objs, "Deployment", name)).Spec.Template.Spec
		if args := container(t, spec, name).Args; !slices.Contains(args, "--log-level=debug") || !slices.Contains(args, "--log-format=text") {
			t.Errorf("%s args %v lack the log options", name, args)
		}
	}

	kv := find(t, objs, "InternalVirtualizationKubeVirt", "kubevirt")
	for path, want := range map[string]any{
		"spec.imageRegistry":   "registry.example.org/virt",
		"spec.imageTag":        "v0.2.0",
		"spec.imagePullPolicy": "Always",
		"spec.infra.replicas":  int64(3),
		"spec.configuration.developerConfiguration.useEmulation":                            true,
		"spec.workloads.nodePlacement.nodeSelector.virtualization\\.deckhouse\\.io/vm-node": "true",
	} {
		got, _, _ := unstructured.NestedFieldNoCopy(kv.Object, splitPath(path)...)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("KubeVirt %s = %#v, want %#v", path, got, want)
		}
	}
	gates, _, _ := unstructured.NestedStringSlice(kv.Object, "spec", "configuration", "developerConfiguration", "featureGates")
	if !reflect.DeepEqual(gates, []string{"HotplugVolumes", "Snapshot"}) {
		t.Errorf("feature gates %v", gates)
	}
	patches, _, _ := unstructured.NestedSlice(kv.Object, "spec", "customizeComponents", "patches")
	var named []string
	for _, p := range patches {
		m := p.(map[string]any)
		named = append(named, fmt.Sprint(m["resourceType"], "/", m["resourceName"], " ", m["patch"]))
	}
	for _, want := range []string{
		`Deployment/virt-api {"spec":{"template":{"spec":{"containers":[{"name":"virt-api","resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}],"priorityClassName":"system-cluster-critical"}}}}`,
		`DaemonSet/virt-handler {"spec":{"template":{"spec":{"containers":[{"name":"virt-handler","resources":{"limits":{"memory":"1Gi"}}}],"priorityClassName":"system-cluster-critical"}}}}`,
		`Deployment/virt-controller {"spec":{"template":{"spec":{"priorityClassName":"system-cluster-critical"}}}}`,
	} {
		if !slices.Contains(named, want) {
			t.Errorf("customizeComponents patches %q lack %s", named, want)
		}
	}
	binding := into[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", release+"-metrics-reader"))
	if len(binding.Subjects) != 2 || binding.Subjects[0].Namespace != "monitoring" || binding.Subjects[1].APIGroup != rbacv1.GroupName {
		t.Errorf("metrics-reader subjects %+v", binding.Subjects)
	}
	sm := find(t, objs, "ServiceMonitor", "virt-operator")
	if sm.GetLabels()["prometheus"] != "main" {
		t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
	}
	if objsOf(objs, "PriorityClass") != nil {
		t.Errorf("priorityClass.create=false still renders a PriorityClass")
	}
}

// splitPath splits a dotted path; "\." is a dot inside a key.
func splitPath(p string) []string {
	parts := strings.Split(strings.ReplaceAll(p, `\.`, "\x00"), ".")
	for i := range parts {
		parts[i] = strings.ReplaceAll(parts[i], "\x00", ".")
	}
	return parts
}

func objsOf(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func container(t testing.TB, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %s", name)
	return corev1.Container{}
}

// The cert-manager variant issues the serving certificate instead of the chart.
func TestCertManager(t *testing.T) {
	t.Parallel()
	own := decode(t, render(t, "--set", "certManager.enabled=true"))
	for _, s := range objsOf(own, "Secret") {
		if typ, _, _ := unstructured.NestedString(s.Object, "type"); typ == string(corev1.SecretTypeTLS) {
			t.Errorf("with cert-manager the chart still writes the serving certificate's Secret %s", s.GetName())
		}
	}
	dvcrCert := find(t, own, "Certificate", "dvcr")
	if s, _, _ := unstructured.NestedString(dvcrCert.Object, "spec", "secretName"); s != "dvcr-tls" {
		t.Errorf("DVCR's Certificate secretName %q", s)
	}
	cert := find(t, own, "Certificate", "virt-operator-metrics")
	if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != "virt-operator-metrics-tls" {
		t.Errorf("Certificate secretName %q", s)
	}
	if n, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name"); n != "virt-operator-metrics-ca" {
		t.Errorf("Certificate issuer %q, want the chart's CA Issuer", n)
	}
	find(t, own, "Issuer", "virt-operator-metrics-selfsigned")

	platform := decode(t, render(t, "--set", "certManager.enabled=true,certManager.issuerRef.name=platform-ca"))
	if objsOf(platform, "Issuer") != nil {
		t.Errorf("with an issuer given the chart still makes its own")
	}
	cert = find(t, platform, "Certificate", "virt-operator-metrics")
	if k, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind"); k != "ClusterIssuer" {
		t.Errorf("issuer kind %q", k)
	}
}

// Without prometheus-operator's API, or with monitoring off, there is no ServiceMonitor.
func TestMonitoringOnlyWithItsAPI(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"no API":   nil,
		"disabled": append([]string{"--set", "monitoring.enabled=false"}, monitoringAPIs...),
	} {
		objs := decode(t, render(t, args...))
		if objsOf(objs, "ServiceMonitor") != nil || objsOf(objs, "PrometheusRule") != nil {
			t.Errorf("%s: ServiceMonitor or PrometheusRule rendered", name)
		}
	}
	objs := renders(t)["default"]
	find(t, objs, "ServiceMonitor", "virt-operator")
	find(t, objs, "PrometheusRule", "virtualization")
}

// podSpecs are the pod templates of every workload in objs, by "Kind/name".
func podSpecs(t testing.TB, objs []*unstructured.Unstructured) map[string]corev1.PodSpec {
	t.Helper()
	out := map[string]corev1.PodSpec{}
	for _, o := range objs {
		var path []string
		switch o.GetKind() {
		case "Pod":
			path = []string{"spec"}
		case "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job":
			path = []string{"spec", "template", "spec"}
		case "CronJob":
			path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
		default:
			continue
		}
		m, ok, err := unstructured.NestedMap(o.Object, path...)
		if err != nil || !ok {
			t.Fatalf("%s %s: no pod spec: %v", o.GetKind(), o.GetName(), err)
		}
		out[o.GetKind()+"/"+o.GetName()] = *into[corev1.PodSpec](t, &unstructured.Unstructured{Object: m})
	}
	return out
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func isKubeRBACProxy(c corev1.Container, image string) bool {
	return strings.HasPrefix(c.Name, "kube-rbac-proxy") && c.Image == image
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Every container port named *metrics* is a kube-rbac-proxy's TLS listener in front of a
// loopback-only metrics listener of its pod, and no other container serves metrics beyond the
// pod's loopback.
func TestMetricsPortsBehindKubeRBACProxy(t *testing.T) {
	t.Parallel()
	for render, objs := range renders(t) {
		dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", "virt-operator"))
		proxyImage := container(t, dep.Spec.Template.Spec, "kube-rbac-proxy").Image
		isProxy := func(c corev1.Container) bool { return isKubeRBACProxy(c, proxyImage) }
		for workload, spec := range podSpecs(t, objs) {
			checkMetricsBehindProxy(t, render+": "+workload, spec, isProxy)
		}
		// A Service's metrics ports reach only the proxies of the pods it selects.
		for _, o := range objsOf(objs, "Service") {
			svc := into[corev1.Service](t, o)
			for workload, spec := range podSpecs(t, objs) {
				if !selects(svc.Spec.Selector, templateLabels(t, objs, workload)) {
					continue
				}
				for _, p := range svc.Spec.Ports {
					if !strings.Contains(p.Name, "metrics") {
						continue
					}
					found := false
					for _, c := range spec.Containers {
						for _, cp := range c.Ports {
							if cp.Name == p.TargetPort.String() {
								found = isProxy(c)
							}
						}
					}
					if !found {
						t.Errorf("%s: Service %s port %s targets %s of %s, which is no kube-rbac-proxy port", render, svc.Name, p.Name, p.TargetPort.String(), workload)
					}
				}
			}
		}
	}
}

// templateLabels are the pod template labels of a workload ("Kind/name").
func templateLabels(t testing.TB, objs []*unstructured.Unstructured, workload string) map[string]string {
	t.Helper()
	kind, name, _ := strings.Cut(workload, "/")
	labels, _, _ := unstructured.NestedStringMap(find(t, objs, kind, name).Object, "spec", "template", "metadata", "labels")
	return labels
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkMetricsBehindProxy checks one pod: every metrics port is a proxy's, every other metrics
// listener is on loopback, and each of those has a proxy in front.
func checkMetricsBehindProxy(t *testing.T, where string, spec corev1.PodSpec, isProxy func(corev1.Container) bool) {
	t.Helper()
	// The loopback metrics listeners of the pod's other containers, by port.
	listeners := map[string]string{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		if isProxy(c) {
			continue
		}
		for _, a := range c.Args {
			name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !ok || !strings.HasPrefix(a, "--") || !strings.Contains(name, "metrics") || value == "0" || value == "" {
				continue
			}
			host, port, err := net.SplitHostPort(value)
			if err != nil || !loopback(host) {
				t.Errorf("%s: container %s serves metrics on %q (--%s), not on loopback", where, c.Name, value, name)
				continue
			}
			listeners[port] = c.Name
		}
		// Listeners set through the environment: distribution's REGISTRY_HTTP_DEBUG_ADDR.
		for _, e := range c.Env {
			if !strings.Contains(e.Name, "METRICS") && !strings.HasSuffix(e.Name, "DEBUG_ADDR") {
				continue
			}
			host, port, err := net.SplitHostPort(e.Value)
			if err != nil || !loopback(host) {
				t.Errorf("%s: container %s serves metrics on %q ($%s), not on loopback", where, c.Name, e.Value, e.Name)
				continue
			}
			listeners[port] = c.Name
		}
		for _, p := range c.Ports {
			if strings.Contains(p.Name, "metrics") {
				t.Errorf("%s: container %s exposes metrics port %s itself, not through kube-rbac-proxy", where, c.Name, p.Name)
			}
		}
	}
	fronted := map[string]bool{}
	for _, c := range spec.Containers {
		if !isProxy(c) {
			continue
		}
		listen, _ := flagValue(c.Args, "secure-listen-address")
		_, lport, err := net.SplitHostPort(listen)
		if err != nil {
			t.Errorf("%s: %s --secure-listen-address %q: %v", where, c.Name, listen, err)
			continue
		}
		var metricsPorts []int32
		for _, p := range c.Ports {
			if strings.Contains(p.Name, "metrics") {
				metricsPorts = append(metricsPorts, p.ContainerPort)
			}
		}
		if len(metricsPorts) != 1 || strconv.Itoa(int(metricsPorts[0])) != lport {
			t.Errorf("%s: %s listens on %s but declares metrics ports %v", where, c.Name, listen, metricsPorts)
		}
		for _, f := range []string{"tls-cert-file", "tls-private-key-file"} {
			if v, _ := flagValue(c.Args, f); v == "" {
				t.Errorf("%s: %s has no --%s: it would serve a self-signed certificate", where, c.Name, f)
			}
		}
		up, _ := flagValue(c.Args, "upstream")
		u, err := url.Parse(up)
		if err != nil || u.Scheme != "http" || !loopback(u.Hostname()) {
			t.Errorf("%s: %s --upstream %q is not a loopback HTTP listener", where, c.Name, up)
			continue
		}
		if listeners[u.Port()] == "" {
			t.Errorf("%s: %s forwards to %s, where no container of the pod serves metrics", where, c.Name, up)
		}
		fronted[u.Port()] = true
	}
	for port, c := range listeners {
		if !fronted[port] {
			t.Errorf("%s: the metrics of %s (127.0.0.1:%s) have no kube-rbac-proxy in front", where, c, port)
		}
	}
}

// No Role or ClusterRole of the chart grants a wildcard: no "*" verb, resource or API group.
func TestNoWildcardRBAC(t *testing.T) {
	t.Parallel()
	for render, objs := range renders(t) {
		for _, o := range objs {
			if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
				continue
			}
			role := into[rbacv1.ClusterRole](t, o)
			for i, r := range role.Rules {
				verbs, resources := slices.Contains(r.Verbs, "*"), slices.Contains(r.Resources, "*")
				if verbs && resources {
					t.Errorf("%s: %s %s rule %d grants every verb on every resource: %+v", render, o.GetKind(), o.GetName(), i, r)
				} else if verbs || resources || slices.Contains(r.APIGroups, "*") || slices.Contains(r.NonResourceURLs, "*") {
					t.Errorf("%s: %s %s rule %d has a wildcard: %+v", render, o.GetKind(), o.GetName(), i, r)
				}
			}
		}
	}
}

// virt-operator's ClusterRole is exactly virtoperator.OperatorRules() renamed as its rewriter
// renames, bound to the account its pods run as.
func TestOperatorClusterRole(t *testing.T) {
	t.Parallel()
	want, err := chartsrc.RenamedOperatorRules()
	if err != nil {
		t.Fatal(err)
	}
	for render, objs := range renders(t) {
		name := release + "-virt-operator"
		role := into[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", name))
		if !reflect.DeepEqual(role.Rules, want) {
			got, _ := json.MarshalIndent(role.Rules, "", " ")
			exp, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s: ClusterRole %s rules differ from the renamed virtoperator.OperatorRules()\n got: %s\nwant: %s", render, name, got, exp)
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				if g == "kubevirt.io" || strings.HasSuffix(g, ".kubevirt.io") && g != "subresources.kubevirt.io" {
					t.Errorf("%s: rule %+v names %s, which the cluster does not serve", render, r, g)
				}
			}
		}
		binding := into[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", name))
		dep := into[appsv1.Deployment](t, find(t, objs, "Deployment", "virt-operator"))
		wantSubject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: namespace}
		if binding.RoleRef.Name != name || !reflect.DeepEqual(binding.Subjects, []rbacv1.Subject{wantSubject}) {
			t.Errorf("%s: ClusterRoleBinding %s: %+v -> %+v, want %+v", render, name, binding.Subjects, binding.RoleRef, wantSubject)
		}
		find(t, objs, "ServiceAccount", wantSubject.Name)
	}
}

// virt-operator talks to the apiserver only through its rewriter sidecar, on loopback, as the
// components it installs do.
func TestOperatorTalksThroughItsRewriter(t *testing.T) {
	t.Parallel()
	objs := renders(t)["default"]
	spec := into[appsv1.Deployment](t, find(t, objs, "Deployment", "virt-operator")).Spec.Template.Spec
	op := container(t, spec, "virt-operator")
	kcPath, _ := flagValue(op.Args, "kubeconfig")
	server := rewriterServer(t, objs, spec, op, kcPath)
	// The components' kubeconfig, which virt-operator writes, points at the same address.
	comp, err := clientcmd.Load([]byte(virtoperator.SidecarKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if s := comp.Clusters[comp.Contexts[comp.CurrentContext].Cluster].Server; s != server {
		t.Errorf("the components' sidecar kubeconfig points at %s, the operator's at %s", s, server)
	}
}

// virtualization-controller (KUBECONFIG in its environment) talks to the apiserver through its own
// rewriter sidecar, so it uses kubevirt.io types for the internal VMs.
func TestControllerTalksThroughItsRewriter(t *testing.T) {
	t.Parallel()
	objs := renders(t)["default"]
	spec := into[appsv1.Deployment](t, find(t, objs, "Deployment", "virtualization-controller")).Spec.Template.Spec
	c := container(t, spec, "virtualization-controller")
	var kcPath string
	for _, e := range c.Env {
		if e.Name == "KUBECONFIG" {
			kcPath = e.Value
		}
	}
	rewriterServer(t, objs, spec, c, kcPath)
}

// rewriterServer is the server of the kubeconfig at kcPath in c, which must be a ConfigMap volume
// and point at the pod's kube-api-rewriter's api listener, on loopback.
func rewriterServer(t *testing.T, objs []*unstructured.Unstructured, spec corev1.PodSpec, c corev1.Container, kcPath string) string {
	t.Helper()
	rw := container(t, spec, "kube-api-rewriter")
	var volume string
	for _, m := range c.VolumeMounts {
		if filepath.Dir(kcPath) == m.MountPath {
			volume = m.Name
		}
	}
	var configMap string
	for _, v := range spec.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			configMap = v.ConfigMap.Name
		}
	}
	if configMap == "" {
		t.Fatalf("%s: kubeconfig %q is not in a ConfigMap volume", c.Name, kcPath)
	}
	cm := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", configMap))
	kc, err := clientcmd.Load([]byte(cm.Data[filepath.Base(kcPath)]))
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", configMap, err)
	}
	server := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster].Server
	apiListen, _ := flagValue(rw.Args, "api-listen")
	if server != "http://"+apiListen {
		t.Errorf("%s's kubeconfig points at %s, its rewriter listens on %s", c.Name, server, apiListen)
	}
	host, _, _ := net.SplitHostPort(apiListen)
	if !loopback(host) {
		t.Errorf("the rewriter's plain HTTP api listener %s is not on loopback", apiListen)
	}
	return server
}

// The chart's CRDs are the generated ones, and helm reads them from crds/.
func TestChartCRDs(t *testing.T) {
	t.Parallel()
	out, err := helm(t, "show", "crds", chartDir(t))
	if err != nil {
		t.Fatalf("helm show crds: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, o := range decode(t, out) {
		names[o.GetName()] = true
	}
	var files []string
	for _, dir := range chartsrc.CRDSourceDirs {
		f, _ := filepath.Glob(filepath.Join(repoRoot(t), dir, "*.yaml"))
		files = append(files, f...)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range decode(t, string(data)) {
			if !names[o.GetName()] {
				t.Errorf("helm show crds lacks %s", o.GetName())
			}
		}
	}
}

// The components virt-operator installs keep the same rule: their metrics listen on loopback and
// every metrics port is a kube-rbac-proxy's. It applies once virt-operator adds kube-rbac-proxy
// containers (named kube-rbac-proxy*); until then it only checks that the listeners are on
// loopback.
func TestInstalledComponentsMetricsBehindKubeRBACProxy(t *testing.T) {
	t.Parallel()
	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: namespace}}
	objs := virtoperator.Objects(kv, virtoperator.DefaultConfig(), virtoperator.Certs{})
	isProxy := func(c corev1.Container) bool { return strings.HasPrefix(c.Name, "kube-rbac-proxy") }
	specs := map[string]corev1.PodSpec{}
	proxies := 0
	for _, o := range objs {
		switch w := o.(type) {
		case *appsv1.Deployment:
			specs["Deployment/"+w.Name] = w.Spec.Template.Spec
		case *appsv1.DaemonSet:
			specs["DaemonSet/"+w.Name] = w.Spec.Template.Spec
		}
	}
	for _, spec := range specs {
		for _, c := range spec.Containers {
			if isProxy(c) {
				proxies++
			}
		}
	}
	for workload, spec := range specs {
		if proxies == 0 {
			// Only the loopback half of the rule for now.
			checkLoopbackMetrics(t, workload, spec)
			continue
		}
		checkMetricsBehindProxy(t, workload, spec, isProxy)
	}
	if proxies == 0 {
		t.Log("virt-operator adds no kube-rbac-proxy yet: checked that the components' metrics listen on loopback only")
	}
}

// checkLoopbackMetrics checks that no container of the pod serves metrics beyond its loopback.
func checkLoopbackMetrics(t *testing.T, where string, spec corev1.PodSpec) {
	t.Helper()
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, a := range c.Args {
			name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !ok || !strings.HasPrefix(a, "--") || !strings.Contains(name, "metrics") || value == "0" || value == "" {
				continue
			}
			if host, _, err := net.SplitHostPort(value); err != nil || !loopback(host) {
				t.Errorf("%s: container %s serves metrics on %q (--%s), not on loopback", where, c.Name, value, name)
			}
		}
	}
}
