package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool comes with Debian's prometheus package (hack/install-deps.sh).
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool: %v (make apt-deps installs the prometheus package)", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
		} `json:"rules"`
	} `json:"groups"`
}

type unitTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// The PrometheusRule's groups pass promtool check rules, and testdata/alerts_test.yaml has a
// promtool unit test that makes each alert fire, which promtool test rules runs.
func TestAlerts(t *testing.T) {
	t.Parallel()
	rule := find(t, renders(t)["default"], "PrometheusRule", "virtualization")
	spec, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(testdata(t, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}

	var rules ruleFile
	if err := yaml.Unmarshal(spec, &rules); err != nil {
		t.Fatal(err)
	}
	var units unitTests
	if err := yaml.Unmarshal(tests, &units); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, u := range units.Tests {
		for _, a := range u.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	sort.Strings(alerts)
	if len(alerts) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s has no promtool test that makes it fire", a)
		}
	}
	for a := range fires {
		if !slices.Contains(alerts, a) {
			t.Errorf("testdata/alerts_test.yaml tests %s, which the chart does not have", a)
		}
	}

	promtool(t, dir, "check", "rules", "rules.yaml")
	promtool(t, dir, "test", "rules", "alerts_test.yaml")
}
