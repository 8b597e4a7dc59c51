package vmimetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

func u(v uint64) *uint64 { return &v }

func TestSamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   launcherapi.DomainStats
		want []string // family{labels} value
	}{
		{"nothing reported", launcherapi.DomainStats{}, nil},
		{"cpu in seconds, unreported left out", launcherapi.DomainStats{CPU: &launcherapi.CPUStats{TimeNanoseconds: u(2_500_000_000), SystemNanoseconds: u(0)}},
			[]string{"kubevirt_vmi_cpu_usage_seconds_total[] 2.5", "kubevirt_vmi_cpu_system_usage_seconds_total[] 0"}},
		{"vcpus by id and state", launcherapi.DomainStats{VCPUs: []launcherapi.VCPUStats{
			{ID: 0, State: launcherapi.VCPURunning, TimeNanoseconds: u(1e9), WaitNanoseconds: u(5e8), DelayNanoseconds: u(0)},
			{ID: 1, State: launcherapi.VCPUOffline},
		}}, []string{"kubevirt_vmi_vcpu_seconds_total[0 running] 1", "kubevirt_vmi_vcpu_wait_seconds_total[0] 0.5", "kubevirt_vmi_vcpu_delay_seconds_total[0] 0"}},
		{"memory in bytes", launcherapi.DomainStats{Memory: &launcherapi.MemoryStats{
			DomainBytes: u(128 << 20), ActualBalloonBytes: u(128 << 20), ResidentBytes: u(40 << 20), AvailableBytes: u(100), UnusedBytes: u(50),
			UsableBytes: u(70), CachedBytes: u(10), SwapInBytes: u(1), SwapOutBytes: u(2), MajorFaults: u(3), MinorFaults: u(4),
		}}, []string{
			"kubevirt_vmi_memory_domain_bytes[] 1.34217728e+08", "kubevirt_vmi_memory_actual_balloon_bytes[] 1.34217728e+08",
			"kubevirt_vmi_memory_resident_bytes[] 4.194304e+07", "kubevirt_vmi_memory_available_bytes[] 100", "kubevirt_vmi_memory_unused_bytes[] 50",
			"kubevirt_vmi_memory_usable_bytes[] 70", "kubevirt_vmi_memory_cached_bytes[] 10", "kubevirt_vmi_memory_swap_in_traffic_bytes[] 1",
			"kubevirt_vmi_memory_swap_out_traffic_bytes[] 2", "kubevirt_vmi_memory_pgmajfault_total[] 3", "kubevirt_vmi_memory_pgminfault_total[] 4",
		}},
		{"network by interface", launcherapi.DomainStats{Interfaces: []launcherapi.InterfaceStats{
			{Name: "default", RxBytes: u(100), RxPackets: u(2), RxErrors: u(0), RxDropped: u(1), TxBytes: u(50), TxPackets: u(1), TxErrors: u(0), TxDropped: u(0)},
			{Name: "second", TxBytes: u(7)},
		}}, []string{
			"kubevirt_vmi_network_receive_bytes_total[default] 100", "kubevirt_vmi_network_receive_packets_total[default] 2",
			"kubevirt_vmi_network_receive_errors_total[default] 0", "kubevirt_vmi_network_receive_packets_dropped_total[default] 1",
			"kubevirt_vmi_network_transmit_bytes_total[default] 50", "kubevirt_vmi_network_transmit_packets_total[default] 1",
			"kubevirt_vmi_network_transmit_errors_total[default] 0", "kubevirt_vmi_network_transmit_packets_dropped_total[default] 0",
			"kubevirt_vmi_network_transmit_bytes_total[second] 7",
		}},
		{"storage by drive, times in seconds", launcherapi.DomainStats{Disks: []launcherapi.DiskStats{
			{Name: "rootdisk", ReadRequests: u(10), ReadBytes: u(4096), ReadNanoseconds: u(2e9), WriteRequests: u(1), WriteBytes: u(512),
				WriteNanoseconds: u(1e6), FlushRequests: u(2), FlushNanoseconds: u(0)},
		}}, []string{
			"kubevirt_vmi_storage_iops_read_total[rootdisk] 10", "kubevirt_vmi_storage_read_traffic_bytes_total[rootdisk] 4096",
			"kubevirt_vmi_storage_read_times_seconds_total[rootdisk] 2", "kubevirt_vmi_storage_iops_write_total[rootdisk] 1",
			"kubevirt_vmi_storage_write_traffic_bytes_total[rootdisk] 512", "kubevirt_vmi_storage_write_times_seconds_total[rootdisk] 0.001",
			"kubevirt_vmi_storage_flush_requests_total[rootdisk] 2", "kubevirt_vmi_storage_flush_times_seconds_total[rootdisk] 0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range Samples(tc.in) {
				got = append(got, fmt.Sprintf("%s%v %v", s.Family, s.Labels, s.Value))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// Every sample belongs to a family with as many labels as it carries.
func TestSamplesMatchTheirFamilies(t *testing.T) {
	arity := map[string]int{}
	for _, f := range families {
		if _, dup := arity[f.name]; dup {
			t.Errorf("family %s twice", f.name)
		}
		arity[f.name] = len(f.labels)
	}
	all := launcherapi.DomainStats{
		CPU:        &launcherapi.CPUStats{TimeNanoseconds: u(1), UserNanoseconds: u(1), SystemNanoseconds: u(1)},
		VCPUs:      []launcherapi.VCPUStats{{State: "running", TimeNanoseconds: u(1), WaitNanoseconds: u(1), DelayNanoseconds: u(1)}},
		Memory:     &launcherapi.MemoryStats{DomainBytes: u(1), ActualBalloonBytes: u(1), ResidentBytes: u(1), AvailableBytes: u(1), UnusedBytes: u(1), UsableBytes: u(1), CachedBytes: u(1), SwapInBytes: u(1), SwapOutBytes: u(1), MajorFaults: u(1), MinorFaults: u(1)},
		Interfaces: []launcherapi.InterfaceStats{{Name: "n", RxBytes: u(1), RxPackets: u(1), RxErrors: u(1), RxDropped: u(1), TxBytes: u(1), TxPackets: u(1), TxErrors: u(1), TxDropped: u(1)}},
		Disks:      []launcherapi.DiskStats{{Name: "d", ReadRequests: u(1), ReadBytes: u(1), ReadNanoseconds: u(1), WriteRequests: u(1), WriteBytes: u(1), WriteNanoseconds: u(1), FlushRequests: u(1), FlushNanoseconds: u(1)}},
	}
	seen := map[string]bool{}
	for _, s := range Samples(all) {
		n, ok := arity[s.Family]
		if !ok || n != len(s.Labels) {
			t.Errorf("sample %s%v: family has %d labels (known %v)", s.Family, s.Labels, n, ok)
		}
		seen[s.Family] = true
	}
	if len(seen) != len(families) {
		t.Errorf("%d of %d families have a sample when every statistic is reported", len(seen), len(families))
	}
}

type fakeLister []Instance

func (f fakeLister) Instances(context.Context) ([]Instance, error) { return f, nil }

func stats(st *launcherapi.DomainStats, err error) func(context.Context) (*launcherapi.DomainStats, error) {
	return func(context.Context) (*launcherapi.DomainStats, error) { return st, err }
}

// A launcher that fails or does not answer in time costs its own VMI's samples only, and the
// scrape waits no longer than the timeout.
func TestCollector(t *testing.T) {
	hung := func(ctx context.Context) (*launcherapi.DomainStats, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	lister := fakeLister{
		{Node: "n1", Namespace: "ns", Name: "good", Stats: stats(&launcherapi.DomainStats{
			CPU:        &launcherapi.CPUStats{TimeNanoseconds: u(3e9)},
			Interfaces: []launcherapi.InterfaceStats{{Name: "default", RxBytes: u(10)}},
		}, nil)},
		{Node: "n1", Namespace: "ns", Name: "broken", Stats: stats(nil, errors.New("launcher gone"))},
		{Node: "n1", Namespace: "ns", Name: "hung", Stats: hung},
	}
	c := New(lister, 200*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := `
# HELP kubevirt_vmi_cpu_usage_seconds_total Total CPU time spent in all modes (sum of both vcpu and hypervisor usage).
# TYPE kubevirt_vmi_cpu_usage_seconds_total counter
kubevirt_vmi_cpu_usage_seconds_total{name="good",namespace="ns",node="n1"} 3
# HELP kubevirt_vmi_network_receive_bytes_total Total network traffic received in bytes.
# TYPE kubevirt_vmi_network_receive_bytes_total counter
kubevirt_vmi_network_receive_bytes_total{interface="default",name="good",namespace="ns",node="n1"} 10
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the scrape took %v with a timeout of 200ms", d)
	}
}
