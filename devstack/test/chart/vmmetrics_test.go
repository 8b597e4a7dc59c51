package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d8virt/devstack/prometheus/scrapeconfig"
)

// The chart's ServiceMonitors become a configuration Prometheus loads (promtool check config),
// and only virt-handler's component endpoint relabels samples: its per-VM metrics, into the
// reference module's names.
func TestVMMetricRelabelingsLoad(t *testing.T) {
	dir := t.TempDir()
	env := scrapeconfig.Env{TargetsDir: dir, ServiceAccountTokenFile: filepath.Join(dir, "token"), FilesDir: dir, ScrapeInterval: "30s"}
	cfg, needs := generated(t, env)
	// virt-handler's first endpoint is its component's port, metrics.
	handler := "serviceMonitor/" + namespace + "/virt-handler/0"
	for _, sc := range cfg.ScrapeConfigs {
		var renames int
		for _, r := range sc.MetricRelabelConfigs {
			if r.TargetLabel == "__name__" && r.Replacement != nil && strings.HasPrefix(*r.Replacement, "d8_virtualization_virtualmachine_") {
				renames++
			}
		}
		if sc.JobName == handler && renames < 10 {
			t.Errorf("%s renames %d metrics into d8_virtualization_virtualmachine_*", sc.JobName, renames)
		}
		if sc.JobName != handler && len(sc.MetricRelabelConfigs) > 0 {
			t.Errorf("%s relabels its samples", sc.JobName)
		}
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{env.ServiceAccountTokenFile}, paths(needs.Files)...) {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool(t, dir, "check", "config", "--syntax-only", "prometheus.yml")
}

// generated is the scrape configuration of the ServiceMonitors the chart renders.
func generated(t *testing.T, env scrapeconfig.Env) (scrapeconfig.Config, scrapeconfig.Needs) {
	t.Helper()
	var sms []scrapeconfig.ServiceMonitor
	for _, o := range objsOf(decode(t, render(t, monitoringAPIs...)), "ServiceMonitor") {
		body, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		sm, err := scrapeconfig.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		sms = append(sms, sm)
	}
	cfg, needs, err := scrapeconfig.Generate(sms, env)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, needs
}

func paths(files []scrapeconfig.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}
