package virtoperator

import (
	"crypto/x509"
	"encoding/pem"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/d8virt/kubevirt-core/pkg/virtoperator/certs"
)

// argValue is the value of --name=value in args, and whether it is there.
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// metricsListenFlags are the flags with which the core's programs say where their metrics go.
var metricsListenFlags = []string{"metrics-bind-address", "metrics-listen"}

// workloadsOf are the pod templates of the built workloads, by name.
func workloadsOf(t *testing.T, ix index) map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for _, o := range ix {
		switch w := o.(type) {
		case *appsv1.Deployment:
			out[w.Name] = w.Spec.Template
		case *appsv1.DaemonSet:
			out[w.Name] = w.Spec.Template
		}
	}
	if len(out) != 3 {
		t.Fatalf("workloads %v", out)
	}
	return out
}

// TestMetricsBehindKubeRBACProxy: in every pod, each metrics listener is on loopback, each has
// exactly one kube-rbac-proxy in front of it, and every port that is named like metrics belongs
// to such a proxy.
func TestMetricsBehindKubeRBACProxy(t *testing.T) {
	in := NewInstall(testKV(), testConfig())
	ix := indexOf(in.Objects(testCerts))
	for name, tmpl := range workloadsOf(t, ix) {
		t.Run(name, func(t *testing.T) {
			spec := tmpl.Spec
			listeners := map[string]string{} // loopback address -> container
			upstreams := map[string]string{} // loopback address -> proxy
			for _, c := range spec.Containers {
				for _, f := range metricsListenFlags {
					addr, ok := argValue(c.Args, f)
					if !ok {
						continue
					}
					host, _, err := net.SplitHostPort(addr)
					if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
						t.Errorf("%s serves metrics on %q, not on loopback", c.Name, addr)
					}
					listeners[addr] = c.Name
				}
				if c.Image != in.Images.KubeRBACProxy {
					for _, p := range c.Ports {
						if strings.Contains(p.Name, "metric") {
							t.Errorf("%s exposes port %s itself, not through kube-rbac-proxy", c.Name, p.Name)
						}
					}
					continue
				}
				up, _ := argValue(c.Args, "upstream")
				addr, ok := strings.CutPrefix(up, "http://")
				addr = strings.TrimSuffix(addr, "/")
				if !ok {
					t.Errorf("%s upstream %q", c.Name, up)
				}
				if other, dup := upstreams[addr]; dup {
					t.Errorf("%s and %s both front %s", c.Name, other, addr)
				}
				upstreams[addr] = c.Name
				listen, _ := argValue(c.Args, "secure-listen-address")
				if len(c.Ports) != 1 || !strings.Contains(c.Ports[0].Name, "metric") || listen != ":"+strconv.Itoa(int(c.Ports[0].ContainerPort)) {
					t.Errorf("%s listens on %q with ports %+v", c.Name, listen, c.Ports)
				}
				if rp := c.ReadinessProbe; rp == nil || rp.TCPSocket == nil || len(c.Ports) != 1 || rp.TCPSocket.Port.StrVal != c.Ports[0].Name {
					t.Errorf("%s readiness %+v", c.Name, rp)
				}
				if paths, _ := argValue(c.Args, "allow-paths"); paths != MetricsPath {
					t.Errorf("%s lets through %q", c.Name, paths)
				}
				// TLS from a certificate the operator issues, mounted from its Secret.
				certFile, _ := argValue(c.Args, "tls-cert-file")
				keyFile, _ := argValue(c.Args, "tls-private-key-file")
				if len(c.VolumeMounts) != 1 || certFile != c.VolumeMounts[0].MountPath+"/tls.crt" || keyFile != c.VolumeMounts[0].MountPath+"/tls.key" {
					t.Errorf("%s certificate %q %q mounts %+v", c.Name, certFile, keyFile, c.VolumeMounts)
				}
				if len(c.Command) != 0 {
					t.Errorf("%s overrides the image's entrypoint with %v", c.Name, c.Command)
				}
			}
			if len(listeners) != 2 {
				t.Errorf("metrics listeners %v: want the component's and its rewriter's", listeners)
			}
			for addr, c := range listeners {
				if _, ok := upstreams[addr]; !ok {
					t.Errorf("%s's metrics on %s have no kube-rbac-proxy", c, addr)
				}
			}
			for addr, p := range upstreams {
				if _, ok := listeners[addr]; !ok {
					t.Errorf("%s fronts %s, where nothing serves metrics", p, addr)
				}
			}
		})
	}
}

// TestMetricsServicesAndCertificates: each component has a metrics Service that selects its
// pods with the proxies' ports by name, and the proxies serve a certificate for that Service.
func TestMetricsServicesAndCertificates(t *testing.T) {
	in := NewInstall(testKV(), testConfig())
	ix := indexOf(in.Objects(testCerts))
	tmpls := workloadsOf(t, ix)
	for _, tt := range []struct{ component, secret string }{
		{APIName, APIMetricsCertSecret}, {ControllerName, ControllerMetricsCertSecret}, {HandlerName, HandlerMetricsCertSecret},
	} {
		t.Run(tt.component, func(t *testing.T) {
			tmpl := tmpls[tt.component]
			svc := get[*corev1.Service](t, ix, "Service", "kv-ns", MetricsService(tt.component))
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
				t.Errorf("selector %v misses the pods", svc.Spec.Selector)
			}
			if svc.Labels[MetricsLabel] != "true" {
				t.Errorf("labels %v", svc.Labels)
			}
			ports := map[string]int32{}
			for _, c := range tmpl.Spec.Containers {
				for _, p := range c.Ports {
					ports[p.Name] = p.ContainerPort
				}
			}
			var names []string
			for _, p := range svc.Spec.Ports {
				names = append(names, p.Name)
				if _, ok := ports[p.TargetPort.StrVal]; !ok || p.TargetPort.StrVal != p.Name {
					t.Errorf("service port %+v targets no container port", p)
				}
			}
			if !slices.Equal(names, []string{MetricsPortName, RewriterMetricsPortName}) {
				t.Errorf("service ports %v", names)
			}
			var vol *corev1.Volume
			for i, v := range tmpl.Spec.Volumes {
				if v.Name == metricsCertsVolume {
					vol = &tmpl.Spec.Volumes[i]
				}
			}
			if vol == nil || vol.Secret == nil || vol.Secret.SecretName != tt.secret {
				t.Fatalf("proxies' certificate volume %+v", vol)
			}
			s := get[*corev1.Secret](t, ix, "Secret", "kv-ns", tt.secret)
			b, _ := pem.Decode(s.Data[corev1.TLSCertKey])
			if b == nil {
				t.Fatal("no certificate in", tt.secret)
			}
			cert, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if err := cert.VerifyHostname(MetricsService(tt.component) + ".kv-ns.svc"); err != nil {
				t.Error(err)
			}
			if !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
				t.Errorf("key usage %v", cert.ExtKeyUsage)
			}
		})
	}
}

// TestMetricsCertificateRollsPods: a new proxy certificate changes the pod template, as the
// components' own certificates do, since kube-rbac-proxy is restarted to load a new one.
func TestMetricsCertificateRollsPods(t *testing.T) {
	in := NewInstall(testKV(), testConfig())
	before := workloadsOf(t, indexOf(in.Objects(testCerts)))
	for _, tt := range []struct{ component, secret string }{
		{APIName, APIMetricsCertSecret}, {ControllerName, ControllerMetricsCertSecret}, {HandlerName, HandlerMetricsCertSecret},
	} {
		c := testCerts
		c.Leaves = maps.Clone(testCerts.Leaves)
		c.Leaves[tt.secret] = certs.KeyPair{Cert: []byte("another"), Key: []byte("key")}
		after := workloadsOf(t, indexOf(in.Objects(c)))
		if before[tt.component].Annotations[CertificatesHashAnnotation] == after[tt.component].Annotations[CertificatesHashAnnotation] {
			t.Errorf("a new %s keeps %s's pods", tt.secret, tt.component)
		}
	}
}

// nonResourceAllowed says whether rules grant verb on the non-resource URL path.
func nonResourceAllowed(rules []rbacv1.PolicyRule, path, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.NonResourceURLs, path) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// TestMetricsRBAC: each component's account may review tokens and access, a scraper bound to the
// metrics reader may get /metrics and nothing else, and the operator may grant that.
func TestMetricsRBAC(t *testing.T) {
	ix := indexOf(Objects(testKV(), testConfig(), testCerts))
	for _, account := range []string{APIServiceAccount, ControllerServiceAccount, HandlerServiceAccount} {
		role := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", account)
		for _, a := range []access{{"authentication.k8s.io", "tokenreviews", "create"}, {"authorization.k8s.io", "subjectaccessreviews", "create"}} {
			if !allowed(role.Rules, a.group, a.resource, a.verb) {
				t.Errorf("%s cannot %s %s: its kube-rbac-proxies cannot check a scrape", account, a.verb, a.resource)
			}
		}
	}
	reader := get[*rbacv1.ClusterRole](t, ix, "ClusterRole", "", MetricsReaderRole)
	if len(reader.Rules) != 1 || !nonResourceAllowed(reader.Rules, "/metrics", "get") ||
		len(reader.Rules[0].Resources) != 0 || len(reader.Rules[0].Verbs) != 1 {
		t.Errorf("metrics reader rules %+v", reader.Rules)
	}
	if !nonResourceAllowed(OperatorRules(), "/metrics", "get") {
		t.Error("the operator does not hold get /metrics, so the apiserver will not let it grant it")
	}
}
