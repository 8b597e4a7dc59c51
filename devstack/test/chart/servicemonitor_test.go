package chart

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/prometheus/scrapeconfig"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// The objects virt-operator makes in the release namespace, as the cluster holds them: built by
// the operator's own code in kubevirt.io terms and renamed by the rewriter's, as its sidecar
// renames them on the way to the cluster.
func operatorObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: namespace}}
	rw := rewrite.New(rules.Default())
	var out []*unstructured.Unstructured
	for _, o := range virtoperator.Objects(kv, virtoperator.DefaultConfig(), virtoperator.Certs{}) {
		var gv, kind string
		switch o.(type) {
		case *corev1.Service:
			gv, kind = "v1", "Service"
		case *corev1.Secret:
			gv, kind = "v1", "Secret"
		case *appsv1.Deployment:
			gv, kind = "apps/v1", "Deployment"
		case *appsv1.DaemonSet:
			gv, kind = "apps/v1", "DaemonSet"
		default:
			continue
		}
		out = append(out, renamed(t, rw, o, gv, kind))
	}
	return out
}

func renamed(t *testing.T, rw *rewrite.Rewriter, o client.Object, gv, kind string) *unstructured.Unstructured {
	t.Helper()
	body, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["apiVersion"], m["kind"] = gv, kind
	if body, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if body, err = rw.Rename(body); err != nil {
		t.Fatalf("rename %s %s: %v", kind, o.GetName(), err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(body); err != nil {
		t.Fatal(err)
	}
	return u
}

// Every endpoint of every ServiceMonitor the chart renders selects a Service of the chart or of
// virt-operator (by its labels in the cluster), names a port the Service has, and that port
// targets a kube-rbac-proxy container of the pods behind it; it is scraped over HTTPS with a
// token, the Service's name as the server name and a CA from a Secret that exists. Every metrics
// Service is scraped.
func TestServiceMonitorsScrapeKubeRBACProxies(t *testing.T) {
	t.Parallel()
	opObjs := operatorObjects(t)
	for render, objs := range renders(t) {
		all := append(append([]*unstructured.Unstructured{}, objs...), opObjs...)
		scraped := map[string]bool{}
		sms := objsOf(objs, "ServiceMonitor")
		var names []string
		for _, o := range sms {
			names = append(names, o.GetName())
		}
		slices.Sort(names)
		if want := []string{"dvcr", "virt-api", "virt-controller", "virt-handler", "virt-operator", "virtualization-api", "virtualization-controller"}; !slices.Equal(names, want) {
			t.Errorf("%s: ServiceMonitors %v, want one each of %v", render, names, want)
		}
		for _, o := range sms {
			body, err := o.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			sm, err := scrapeconfig.Parse(body)
			if err != nil {
				t.Errorf("%s: %v", render, err)
				continue
			}
			where := fmt.Sprintf("%s: ServiceMonitor %s", render, sm.Name)
			svcs := selectedServices(t, all, sm)
			if len(svcs) == 0 {
				t.Errorf("%s selects no Service", where)
			}
			for _, svc := range svcs {
				scraped[svc.Name] = true
				for i, ep := range sm.Spec.Endpoints {
					checkEndpoint(t, fmt.Sprintf("%s endpoint %d (Service %s)", where, i, svc.Name), all, svc, ep)
				}
			}
		}
		for _, o := range objsOf(all, "Service") {
			if strings.HasSuffix(o.GetName(), "-metrics") && !scraped[o.GetName()] {
				t.Errorf("%s: no ServiceMonitor scrapes the metrics Service %s", render, o.GetName())
			}
		}
	}
}

func selectedServices(t *testing.T, objs []*unstructured.Unstructured, sm scrapeconfig.ServiceMonitor) []*corev1.Service {
	t.Helper()
	namespaces := sm.Spec.NamespaceSelector.MatchNames
	if len(namespaces) == 0 {
		namespaces = []string{sm.Namespace}
	}
	sel := labels.SelectorFromSet(sm.Spec.Selector.MatchLabels)
	var out []*corev1.Service
	for _, o := range objsOf(objs, "Service") {
		ns := o.GetNamespace()
		if ns == "" {
			ns = namespace
		}
		if slices.Contains(namespaces, ns) && sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, into[corev1.Service](t, o))
		}
	}
	return out
}

func checkEndpoint(t *testing.T, where string, objs []*unstructured.Unstructured, svc *corev1.Service, ep scrapeconfig.Endpoint) {
	t.Helper()
	if ep.Scheme != "https" || ep.BearerTokenFile == "" || ep.TLSConfig == nil || ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("%s: not HTTPS with a token and a verified certificate: %+v", where, ep)
		return
	}
	if want := svc.Name + "." + namespace + ".svc"; ep.TLSConfig.ServerName != want {
		t.Errorf("%s: serverName %q, want %q", where, ep.TLSConfig.ServerName, want)
	}
	if ca := ep.TLSConfig.CA; ca == nil || ca.Secret == nil || !secretHasKey(objs, ca.Secret.Name, ca.Secret.Key) {
		t.Errorf("%s: the CA %+v is no key of a Secret the chart or virt-operator makes", where, ca)
	}
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == ep.Port {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		t.Errorf("%s: the Service has no port %s", where, ep.Port)
		return
	}
	pods := 0
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for workload, spec := range podTemplates(t, objs, sel) {
		pods++
		if c, ok := containerWithPort(spec, port.TargetPort.String()); !ok || !strings.HasPrefix(c.Name, "kube-rbac-proxy") {
			t.Errorf("%s: port %s targets %s of %s, which is no kube-rbac-proxy port", where, ep.Port, port.TargetPort.String(), workload)
		}
	}
	if pods == 0 {
		t.Errorf("%s: the Service selects no workload", where)
	}
}

// podTemplates are the pod templates of the workloads whose pods sel selects.
func podTemplates(t *testing.T, objs []*unstructured.Unstructured, sel labels.Selector) map[string]corev1.PodSpec {
	t.Helper()
	out := map[string]corev1.PodSpec{}
	for _, o := range objs {
		var tmpl corev1.PodTemplateSpec
		switch o.GetKind() {
		case "Deployment":
			tmpl = into[appsv1.Deployment](t, o).Spec.Template
		case "DaemonSet":
			tmpl = into[appsv1.DaemonSet](t, o).Spec.Template
		default:
			continue
		}
		if sel.Matches(labels.Set(tmpl.Labels)) {
			out[o.GetKind()+"/"+o.GetName()] = tmpl.Spec
		}
	}
	return out
}

func containerWithPort(spec corev1.PodSpec, name string) (corev1.Container, bool) {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return c, true
			}
		}
	}
	return corev1.Container{}, false
}

func secretHasKey(objs []*unstructured.Unstructured, name, key string) bool {
	for _, o := range objsOf(objs, "Secret") {
		if o.GetName() != name {
			continue
		}
		// virt-operator's Secrets are built with empty certificates here; the key is what counts.
		if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "data", key); ok {
			return true
		}
	}
	return false
}
