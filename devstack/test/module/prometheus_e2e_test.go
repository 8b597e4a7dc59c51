package module

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/prometheus"
)

// Prometheus scrapes as its account (prometheus.Account, bound to the metrics-reader ClusterRole
// by the local values' monitoring.scrapers) and discovers the targets with it too; outsider has no
// right to the metrics.
const (
	scraper  = prometheus.Account
	outsider = "no-metrics"
)

// moduleValues make the chart's ServiceMonitors scrape often, so the test waits little, and
// give the VMs the addresses local.yaml leaves to this test: its cluster runs beside the one the
// other e2e packages share, on the same network.
var moduleValues = []string{"monitoring.scrapeInterval=5s", "virtualMachineCIDRs={10.213.0.224/27}"}

// checkPrometheus runs Prometheus on the stack with the scrape configuration of the chart's
// ServiceMonitors (st.prometheus, unless a check started it before) and checks that it scrapes
// every component and rewriter through kube-rbac-proxy, that the VM phase and virt-handler's metrics come back from queries while a VM runs, and that
// the proxies refuse a scrape without a token (401) or with a token lacking the ClusterRole (403).
func checkPrometheus(t *testing.T, ctx context.Context, st *stack) {
	p := st.prometheus(t, ctx)
	// Started while checkVirtualMachine's VM ran, before the reinstall replaced the chart's pods.
	p.rediscover(t, ctx)
	tokens := map[string]string{scraper: readFile(t, filepath.Join(p.run.Dir, "token")), outsider: outsiderToken(t, ctx, st)}
	prom := p.client

	t.Log("Prometheus has a target up for each component's and rewriter's kube-rbac-proxy")
	targets := waitTargetsUp(t, ctx, prom)

	t.Log("queries return the VM phase and a virt-handler metric")
	waitSeries(t, ctx, prom, `kubevirt_vmi_phase_count{job="virt-controller-metrics", phase="running", node="`+nodeName+`"} >= 1`)
	waitSeries(t, ctx, prom, `controller_runtime_reconcile_total{job="virt-handler-metrics", endpoint="metrics"}`)
	waitSeries(t, ctx, prom, `kube_api_rewriter_requests_total{job="virt-handler-metrics", endpoint="metrics-rewrite"}`)

	t.Log("kube-rbac-proxy: 401 without a token, 403 without the ClusterRole; promtool check metrics on each scrape")
	client := proxyClient(t, p.run.CertsDir())
	for _, tg := range targets {
		serverName := tg.Labels["service"] + "." + module.Namespace + ".svc"
		for _, c := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {tokens[outsider], http.StatusForbidden}, {tokens[scraper], http.StatusOK}} {
			code, body := scrape(t, ctx, client, tg.ScrapeURL, serverName, c.token)
			if code != c.want {
				t.Errorf("%s (%s/%s) with token %v: %d, want %d", tg.ScrapeURL, tg.Labels["service"], tg.Labels["endpoint"], c.token != "", code, c.want)
			}
			if code == http.StatusOK {
				checkMetricNames(t, ctx, tg.Labels["service"]+"/"+tg.Labels["endpoint"], body)
			}
		}
	}
	checkTargetsFollowRestarts(t, ctx, st, prom)
}

// outsiderToken is a token of an account in Prometheus' namespace without the metrics-reader
// role; the namespace goes at the end of the test.
func outsiderToken(t *testing.T, ctx context.Context, st *stack) string {
	t.Helper()
	if _, err := st.kube.CoreV1().ServiceAccounts(prometheus.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: outsider}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := prometheus.Token(ctx, st.kube, prometheus.Namespace, outsider, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The metrics Services and their ports: every one must be a target that is up.
var metricsEndpoints = map[string][]string{
	"virt-operator-metrics":      {"https-metrics", "https-metrics-rewrite"},
	"virt-api-metrics":           {"metrics", "metrics-rewrite"},
	"virt-controller-metrics":    {"metrics", "metrics-rewrite"},
	"virt-handler-metrics":       {"metrics", "metrics-rewrite"},
	"virtualization-api-metrics": {"https-metrics"},
}

// waitTargetsUp waits until every active target is up and each metrics endpoint has one.
func waitTargetsUp(t *testing.T, ctx context.Context, prom prometheus.Client) []prometheus.Target {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		targets, err := prom.Targets(ctx)
		problem := fmt.Sprint(err)
		if err == nil {
			problem = targetsProblem(targets)
		}
		if problem == "" {
			for _, tg := range targets {
				t.Logf("target up: %s %s/%s pod %s", tg.ScrapeURL, tg.Labels["service"], tg.Labels["endpoint"], tg.Labels["pod"])
			}
			return targets
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus' targets: %s", problem)
		}
		time.Sleep(2 * time.Second)
	}
}

// targetsProblem says what is wrong with the targets, or "".
func targetsProblem(targets []prometheus.Target) string {
	var problems []string
	up := map[string]bool{}
	for _, tg := range targets {
		key := tg.Labels["service"] + "/" + tg.Labels["endpoint"]
		if tg.Health != "up" {
			problems = append(problems, fmt.Sprintf("%s (%s) is %s: %s", key, tg.ScrapeURL, tg.Health, tg.LastError))
			continue
		}
		if tg.Labels["namespace"] != module.Namespace || tg.Labels["pod"] == "" || tg.Labels["job"] != tg.Labels["service"] {
			problems = append(problems, fmt.Sprintf("%s: labels %v", key, tg.Labels))
		}
		up[key] = true
	}
	for svc, ports := range metricsEndpoints {
		for _, p := range ports {
			if !up[svc+"/"+p] {
				problems = append(problems, "no target up for "+svc+"/"+p)
			}
		}
	}
	sort.Strings(problems)
	return strings.Join(problems, "; ")
}

// waitSeries waits until the query returns a series.
func waitSeries(t *testing.T, ctx context.Context, prom prometheus.Client, q string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := prom.Query(ctx, q)
		if err == nil && len(res) > 0 {
			t.Logf("%s: %v = %v", q, res[0].Metric, res[0].Value[1])
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: %v, %d series", q, err, len(res))
		}
		time.Sleep(2 * time.Second)
	}
}

// proxyClient trusts the CAs the scrape configuration uses.
func proxyClient(t *testing.T, caDir string) *http.Client {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(caDir, "*"))
	pool := x509.NewCertPool()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("%s holds no certificate", f)
		}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// scrape GETs a metrics URL as Prometheus would, verifying the certificate for serverName.
func scrape(t *testing.T, ctx context.Context, client *http.Client, url, serverName, token string) (int, []byte) {
	t.Helper()
	tr := client.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.ServerName = serverName
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: client.Timeout, Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// checkMetricNames runs promtool check metrics on a scrape and logs what does not follow
// Prometheus' conventions (a report: the names of the reference are kept even where promtool
// objects).
func checkMetricNames(t *testing.T, ctx context.Context, what string, body []byte) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Logf("promtool check metrics %s (%v):\n%s", what, err, out)
	}
}
