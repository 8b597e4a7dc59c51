package chart

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/yaml"

	"github.com/d8virt/devstack/prometheus"
	"github.com/d8virt/devstack/prometheus/scrapeconfig"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virthandler/vmimetrics"
)

type oneVM []vmimetrics.Instance

func (l oneVM) Instances(context.Context) ([]vmimetrics.Instance, error) { return l, nil }

func u64(v uint64) *uint64 { return &v }

// A real Prometheus (Debian's) scrapes virt-handler's per-VMI collector, fed one VM's statistics,
// with the metric_relabel_configs the chart's virt-handler ServiceMonitor becomes, from a target
// labelled as the module's virt-handler pods are: the series come out under the reference
// module's names and labels, and virt-handler's own metrics keep theirs.
func TestVMMetricRelabelingsInPrometheus(t *testing.T) {
	cfg, _ := generated(t, scrapeconfig.Env{TargetsDir: t.TempDir(), ServiceAccountTokenFile: "/token", FilesDir: t.TempDir()})
	var relabel []scrapeconfig.MetricRelabel
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "serviceMonitor/"+namespace+"/virt-handler/0" {
			relabel = sc.MetricRelabelConfigs
		}
	}
	st := &launcherapi.DomainStats{
		CPU:        &launcherapi.CPUStats{TimeNanoseconds: u64(9e9)},
		VCPUs:      []launcherapi.VCPUStats{{ID: 0, State: launcherapi.VCPURunning, TimeNanoseconds: u64(4e9), WaitNanoseconds: u64(1), DelayNanoseconds: u64(2e9)}},
		Memory:     &launcherapi.MemoryStats{DomainBytes: u64(128 << 20), ResidentBytes: u64(40 << 20), ActualBalloonBytes: u64(128 << 20), MajorFaults: u64(7)},
		Interfaces: []launcherapi.InterfaceStats{{Name: "default", RxBytes: u64(1000)}},
		Disks: []launcherapi.DiskStats{
			{Name: "vd-root", ReadBytes: u64(4096)}, {Name: "cvi-ubuntu", ReadBytes: u64(2048)},
			{Name: "cloudinit", ReadBytes: u64(512)}, {Name: "containerdisk", ReadBytes: u64(256)},
		},
	}
	reg := promclient.NewRegistry()
	reg.MustRegister(vmimetrics.New(oneVM{{Node: "node-a", Namespace: "ns1", Name: "vm1",
		Stats: func(context.Context) (*launcherapi.DomainStats, error) { return st, nil }}}, 5*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil))))
	own := promclient.NewCounter(promclient.CounterOpts{Name: "handler_own_total", Help: "virt-handler's own metric."})
	own.Add(3)
	reg.MustRegister(own)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()

	dir := t.TempDir()
	addr := testenv.FreeLoopbackAddr(t)
	srv, err := prometheus.New(dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := yaml.Marshal(map[string]any{
		"global": map[string]any{"scrape_interval": "1s"},
		"scrape_configs": []any{map[string]any{
			"job_name": "virt-handler-metrics",
			"static_configs": []any{map[string]any{
				"targets": []string{strings.TrimPrefix(target.URL, "http://")},
				// The labels the generated relabelings give virt-handler's targets.
				"labels": map[string]string{"namespace": namespace, "pod": "virt-handler-abcde", "container": "kube-rbac-proxy", "endpoint": "metrics", "service": "virt-handler-metrics"},
			}},
			"metric_relabel_configs": relabel,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(srv.ConfigFile(), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	c := srv.Component()
	cmd := exec.Command(c.Bin, c.Args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	client := prometheus.Client{URL: srv.URL(), HTTP: &http.Client{Timeout: 5 * time.Second}}
	vm := `name="vm1", namespace="ns1", node="node-a", job="virt-handler-metrics", pod="", container="", endpoint="", service="", exported_namespace=""`
	for _, tc := range []struct {
		query string
		want  string
	}{
		{`d8_virtualization_virtualmachine_cpu_usage_seconds_total{` + vm + `, core="0", state="running", id=""}`, "4"},
		{`d8_virtualization_virtualmachine_cpu_steal_seconds_total{` + vm + `, core="0"}`, "2"},
		{`d8_virtualization_virtualmachine_hypervisor_cpu_usage_seconds_total{` + vm + `}`, "9"},
		{`d8_virtualization_virtualmachine_memory_size_bytes{` + vm + `}`, "134217728"},
		{`d8_virtualization_virtualmachine_memory_min_size_bytes{` + vm + `}`, "134217728"},
		{`d8_virtualization_virtualmachine_hypervisor_memory_resident_bytes{` + vm + `}`, "41943040"},
		{`d8_virtualization_virtualmachine_os_memory_pgmajfault_total{` + vm + `}`, "7"},
		{`d8_virtualization_virtualmachine_network_receive_bytes_total{` + vm + `, interface="default"}`, "1000"},
		{`d8_virtualization_virtualmachine_block_device_read_traffic_bytes_total{` + vm + `, block_device_name="root", type="virtualdisk", drive=""}`, "4096"},
		{`d8_virtualization_virtualmachine_block_device_read_traffic_bytes_total{` + vm + `, block_device_name="ubuntu", type="clustervirtualimage", drive=""}`, "2048"},
		{`d8_virtualization_virtualmachine_block_device_read_traffic_bytes_total{` + vm + `, block_device_name="", type="cloudinit", drive="cloudinit"}`, "512"},
		{`d8_virtualization_virtualmachine_block_device_read_traffic_bytes_total{` + vm + `, block_device_name="", type="", drive="containerdisk"}`, "256"},
		{`count({__name__=~"kubevirt_.*|.*vcpu_wait.*"}) or vector(0)`, "0"},
		{`handler_own_total{namespace="` + namespace + `", pod="virt-handler-abcde", endpoint="metrics", job="virt-handler-metrics"}`, "3"},
	} {
		var got []prometheus.Sample
		deadline := time.Now().Add(time.Minute)
		for {
			got, err = client.Query(context.Background(), tc.query)
			if err == nil && len(got) == 1 && fmt.Sprint(got[0].Value[1]) == tc.want {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %v %+v, want one series of %s", tc.query, err, got, tc.want)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}
