package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/core"
	"github.com/d8virt/devstack/testenv"
)

// series is one sample wanted from a scrape: a metric with at least the given labels and a
// value of at least min.
type series struct {
	name   string
	labels map[string]string
	min    float64
}

// checkMetrics scrapes virt-controller, virt-api and virt-handler while a VM runs and has been
// paused and unpaused through the subresource API.
func checkMetrics(t *testing.T, c *cluster, kc client.Client) {
	t.Helper()
	apiURL, err := core.APIMetricsURL(c.core)
	if err != nil {
		t.Fatal(err)
	}
	var handlers corev1.PodList
	if err := kc.List(testenv.Context(t), &handlers, client.InNamespace(core.Namespace), client.MatchingLabels{"kubevirt.io": "virt-handler"}); err != nil || len(handlers.Items) == 0 {
		t.Fatalf("virt-handler pods: %v (%d)", err, len(handlers.Items))
	}
	for _, tc := range []struct {
		component, url string
		want           []series
	}{
		{"virt-controller", "http://" + core.ControllerMetricsAddr(c.core) + "/metrics", []series{
			{"kubevirt_vmi_phase_count", map[string]string{"phase": "running"}, 1},
			{"controller_runtime_reconcile_total", map[string]string{"result": "success"}, 1},
			{"workqueue_adds_total", nil, 1},
		}},
		{"virt-api", apiURL, []series{
			{"kubevirt_virt_api_requests_total", map[string]string{"route": "virtualmachineinstances/pause", "method": "put", "code": "200"}, 1},
			{"kubevirt_virt_api_requests_total", map[string]string{"route": "virtualmachineinstances/console"}, 1},
			{"kubevirt_virt_api_admission_reviews_total", map[string]string{"path": "/virtualmachines-validate", "decision": "allowed"}, 1},
			{"kubevirt_virt_api_request_duration_seconds", map[string]string{"route": "virtualmachineinstances/unpause"}, 1},
		}},
		{"virt-handler", fmt.Sprintf("http://%s:%d/metrics", handlers.Items[0].Status.PodIP, core.HandlerMetricsPort), []series{
			{"controller_runtime_reconcile_total", map[string]string{"result": "success"}, 1},
		}},
	} {
		// Counters lag their requests by nothing, but the VMI collector reads an informer cache.
		eventually(t, 30*time.Second, tc.component+" metrics", func(ctx context.Context) error {
			families, err := scrape(ctx, tc.url)
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

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
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
