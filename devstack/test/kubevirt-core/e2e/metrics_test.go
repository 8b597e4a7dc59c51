package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// metricsScraper is the account the test scrapes virt-handler's kube-rbac-proxies with, bound to
// virt-operator's metrics reader role as a platform's Prometheus is.
const metricsScraper = "e2e-metrics-scraper"

// series is one sample wanted from a scrape: a metric with at least the given labels and a
// value of at least min.
type series struct {
	name   string
	labels map[string]string
	min    float64
}

// checkMetrics scrapes virt-controller, virt-api and virt-handler and their rewriters while a
// VM runs and has been paused and unpaused through the subresource API. Every one of them is
// behind kube-rbac-proxies, as virt-operator installs them: the test scrapes those with a token
// of an account bound to the metrics reader role, as a platform's Prometheus does, trusting the
// core's CA, and checks that a scrape without a token, or with one of an account that is no
// reader, is refused.
func checkMetrics(t *testing.T, c *cluster, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Helper()
	ctx := testenv.Context(t)
	kube, err := kubernetes.NewForConfig(c.rest)
	if err != nil {
		t.Fatal(err)
	}
	scraper := accountToken(t, kube, metricsScraper, virtoperator.MetricsReaderRole)
	stranger := accountToken(t, kube, "e2e-metrics-stranger", "")
	ca, err := kube.CoreV1().Secrets(module.Namespace).Get(ctx, virtoperator.CASecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.Data["ca.crt"])
	// podURL is the metrics URL of a port of the component's first pod (virt-handler's on the
	// VM's node), with a client that trusts the proxies' certificate, issued for the component's
	// metrics Service.
	podURL := func(component string, port int) (string, *http.Client) {
		var pods corev1.PodList
		opts := []client.ListOption{client.InNamespace(module.Namespace), client.MatchingLabels{"kubevirt.io": component}}
		if component == virtoperator.HandlerName {
			opts = append(opts, client.MatchingFields{"spec.nodeName": vmi.Status.NodeName})
		}
		if err := kc.List(ctx, &pods, opts...); err != nil || len(pods.Items) == 0 {
			t.Fatalf("%s pods: %v (%d)", component, err, len(pods.Items))
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: virtoperator.MetricsService(component) + "." + module.Namespace + ".svc",
		}}}
		return "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, strconv.Itoa(port)) + "/metrics", hc
	}
	for _, tc := range []struct {
		component string
		port      int
		token     string
		want      int
	}{
		{virtoperator.HandlerName, virtoperator.MetricsPort, "", http.StatusUnauthorized},
		{virtoperator.HandlerName, virtoperator.RewriterMetricsPort, "", http.StatusUnauthorized},
		{virtoperator.HandlerName, virtoperator.MetricsPort, stranger, http.StatusForbidden},
		{virtoperator.APIName, virtoperator.MetricsPort, "", http.StatusUnauthorized},
		{virtoperator.ControllerName, virtoperator.MetricsPort, stranger, http.StatusForbidden},
	} {
		url, hc := podURL(tc.component, tc.port)
		eventually(t, 30*time.Second, fmt.Sprintf("%s refused", url), func(ctx context.Context) error {
			_, err := scrapeWith(ctx, hc, url, tc.token)
			var refused statusError
			if !errors.As(err, &refused) || int(refused) != tc.want {
				return fmt.Errorf("got %v, want status %d", err, tc.want)
			}
			return nil
		})
	}
	for _, tc := range []struct {
		component string
		port      int
		want      []series
	}{
		{virtoperator.ControllerName, virtoperator.MetricsPort, []series{
			{"kubevirt_vmi_phase_count", map[string]string{"phase": "running"}, 1},
			{"controller_runtime_reconcile_total", map[string]string{"result": "success"}, 1},
			{"workqueue_adds_total", nil, 1},
		}},
		{virtoperator.APIName, virtoperator.MetricsPort, []series{
			{"kubevirt_virt_api_requests_total", map[string]string{"route": "virtualmachineinstances/pause", "method": "put", "code": "200"}, 1},
			{"kubevirt_virt_api_requests_total", map[string]string{"route": "virtualmachineinstances/console"}, 1},
			{"kubevirt_virt_api_admission_reviews_total", map[string]string{"path": "/virtualmachines-validate", "decision": "allowed"}, 1},
			{"kubevirt_virt_api_request_duration_seconds", map[string]string{"route": "virtualmachineinstances/unpause"}, 1},
		}},
		{virtoperator.APIName, virtoperator.RewriterMetricsPort, []series{
			{"kube_api_rewriter_requests_total", nil, 1},
		}},
		{virtoperator.HandlerName, virtoperator.MetricsPort, append([]series{
			{"controller_runtime_reconcile_total", map[string]string{"result": "success"}, 1},
		}, vmiSeries(vmi)...)},
		{virtoperator.HandlerName, virtoperator.RewriterMetricsPort, []series{
			{"kube_api_rewriter_requests_total", nil, 1},
		}},
	} {
		url, hc := podURL(tc.component, tc.port)
		// Counters lag their requests by nothing, but the VMI collector reads an informer cache.
		eventually(t, 30*time.Second, tc.component+" metrics at "+url, func(ctx context.Context) error {
			families, err := scrapeWith(ctx, hc, url, scraper)
			if err != nil {
				return err
			}
			for _, w := range tc.want {
				if got := sampleValue(families[w.name], w.labels); got < w.min {
					return fmt.Errorf("%s%v = %v, want at least %v", w.name, w.labels, got, w.min)
				}
			}
			return nil
		})
	}
}

// accountToken is a token of a new account in the module's namespace, bound to the ClusterRole
// role unless that is empty; the account and binding go at the end of the test.
func accountToken(t *testing.T, kube kubernetes.Interface, name, role string) string {
	t.Helper()
	ctx := testenv.Context(t)
	if _, err := kube.CoreV1().ServiceAccounts(module.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().ServiceAccounts(module.Namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if role != "" {
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: module.Namespace}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	tr, err := kube.CoreV1().ServiceAccounts(module.Namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// statusError is a scrape answered with another status than 200.
type statusError int

func (e statusError) Error() string {
	return fmt.Sprintf("status %d %s", int(e), http.StatusText(int(e)))
}

// scrapeWith scrapes url with hc, with the bearer token when it is set.
func scrapeWith(ctx context.Context, hc *http.Client, url, token string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %w", url, statusError(resp.StatusCode))
	}
	families, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return families, nil
}

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// sampleValue sums the samples of the family that carry all the labels; a histogram counts its
// observations.
func sampleValue(f *dto.MetricFamily, labels map[string]string) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}
