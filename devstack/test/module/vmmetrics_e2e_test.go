package module

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/prometheus"
	"github.com/d8virt/devstack/testenv"
)

// promOnStack is the Prometheus of a test's stack: started by the first check that needs it,
// stopped with its objects when the test ends.
type promOnStack struct {
	client prometheus.Client
	run    prometheus.OnStack
	srv    prometheus.Server
}

// rediscover writes the configuration and CA files again: a reinstall gives the module new
// certificates (prometheus-sd follows the new pods' addresses by itself, not the CAs).
func (p *promOnStack) rediscover(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := p.run.Write(ctx, p.srv); err != nil {
		t.Fatal(err)
	}
}

var (
	promMu   sync.Mutex
	promRuns = map[*stack]*promOnStack{}
)

// prometheus runs Prometheus on the stack with the scrape configuration of the chart's
// ServiceMonitors, once per stack: a later check that needs it after the module's pods changed
// calls rediscover.
func (st *stack) prometheus(t *testing.T, ctx context.Context) *promOnStack {
	t.Helper()
	promMu.Lock()
	defer promMu.Unlock()
	if p := promRuns[st]; p != nil {
		return p
	}
	run := prometheus.OnStack{Stack: st.s, ModuleNamespace: module.Namespace, Dir: t.TempDir(), Addr: testenv.FreeLoopbackAddr(t),
		ScrapeInterval: "5s", TokenTTL: time.Hour, SDBin: filepath.Join(st.opts.BinDir, prometheus.SDDaemon)}
	srv, stop, err := run.Run(ctx)
	t.Cleanup(func() {
		ctx := context.Background()
		rbac := st.kube.RbacV1()
		_ = rbac.RoleBindings(module.Namespace).Delete(ctx, prometheus.DiscoveryRole, metav1.DeleteOptions{})
		_ = rbac.Roles(module.Namespace).Delete(ctx, prometheus.DiscoveryRole, metav1.DeleteOptions{})
		_ = st.kube.CoreV1().Namespaces().Delete(ctx, prometheus.Namespace, metav1.DeleteOptions{})
		if err == nil {
			if err := stop(); err != nil {
				t.Errorf("stop prometheus: %v", err)
			}
		}
		promMu.Lock()
		delete(promRuns, st)
		promMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &promOnStack{client: prometheus.Client{URL: srv.URL(), HTTP: &http.Client{Timeout: 10 * time.Second}}, run: run, srv: srv}
	promRuns[st] = p
	return p
}

// checkVMMetrics queries Prometheus for the running friendly VM vm in namespace default:
// virtualization-controller's phase metric, and virt-handler's per-VM metrics as the chart's
// ServiceMonitor relabels KubeVirt's (kubevirt_vmi_* into d8_virtualization_virtualmachine_*,
// the VM's namespace, its disk by the VirtualDisk's name and kind, the vCPU as core).
func checkVMMetrics(t *testing.T, ctx context.Context, st *stack, vm, disk string) {
	t.Helper()
	t.Log("Prometheus: the VM's phase and virt-handler's per-VM metrics, relabelled as the reference module's")
	prom := st.prometheus(t, ctx).client
	of := `name="` + vm + `", namespace="default"`
	waitSeries(t, ctx, prom, `d8_virtualization_virtualmachine_status_phase{name="`+vm+`", phase="Running"} == 1`)
	for _, q := range []string{
		`d8_virtualization_virtualmachine_cpu_usage_seconds_total{` + of + `, node="` + nodeName + `", core="0", job="virt-handler-metrics", pod=""} > 0`,
		`d8_virtualization_virtualmachine_hypervisor_cpu_usage_seconds_total{` + of + `} > 0`,
		`d8_virtualization_virtualmachine_hypervisor_memory_resident_bytes{` + of + `} > 0`,
		`d8_virtualization_virtualmachine_memory_size_bytes{` + of + `} == 128 * 1024 * 1024`,
		`d8_virtualization_virtualmachine_block_device_read_traffic_bytes_total{` + of + `, block_device_name="` + disk + `", type="virtualdisk", drive=""} > 0`,
		`d8_virtualization_virtualmachine_network_transmit_bytes_total{` + of + `, interface="default"} > 0`,
		`d8_virtualization_virtualmachine_network_receive_bytes_total{` + of + `, interface="default"} > 0`,
	} {
		waitSeries(t, ctx, prom, q)
	}
	for _, q := range []string{`{__name__=~"kubevirt_vmi_.*", job="virt-handler-metrics"}`, `{__name__=~"d8_virtualization_virtualmachine_.*", job="virt-handler-metrics", exported_namespace!=""}`} {
		if res, err := prom.Query(ctx, q); err != nil || len(res) > 0 {
			t.Errorf("query %s: %v, %d series, want none", q, err, len(res))
		}
	}
}
