// Package vmimetrics exports the per-VMI metrics of virt-handler in KubeVirt's names
// (kubevirt_vmi_vcpu_seconds_total, kubevirt_vmi_memory_resident_bytes, ...): on every scrape it
// asks the launcher of each VMI running on the node for libvirt's counters, with a timeout, and
// turns them into samples labelled node, namespace and name, plus id and state of a vCPU, the
// interface of a NIC and the drive of a disk, as KubeVirt labels them.
package vmimetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Labels every sample has: the VMI's node, namespace and name.
var vmiLabels = []string{"node", "namespace", "name"}

// family is one metric: KubeVirt's name, help and type, and the labels of its samples besides
// vmiLabels.
type family struct {
	name   string
	help   string
	kind   prometheus.ValueType
	labels []string
}

var (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
	vcpuL   = []string{"id", "state"}
	idL     = []string{"id"}
	ifaceL  = []string{"interface"}
	driveL  = []string{"drive"}
)

// families are the metrics the collector exports, in KubeVirt's names and types.
var families = []family{
	{"kubevirt_vmi_cpu_usage_seconds_total", "Total CPU time spent in all modes (sum of both vcpu and hypervisor usage).", counter, nil},
	{"kubevirt_vmi_cpu_user_usage_seconds_total", "Total CPU time spent in user mode.", counter, nil},
	{"kubevirt_vmi_cpu_system_usage_seconds_total", "Total CPU time spent in system mode.", counter, nil},
	{"kubevirt_vmi_vcpu_seconds_total", "Total amount of time spent in each state by each vcpu (cpu_time excluding hypervisor time), by vcpu id and its state (running, blocked, offline).", counter, vcpuL},
	{"kubevirt_vmi_vcpu_wait_seconds_total", "Amount of time spent by each vcpu while waiting on I/O.", counter, idL},
	{"kubevirt_vmi_vcpu_delay_seconds_total", "Amount of time spent by each vcpu waiting in the queue instead of running.", counter, idL},
	{"kubevirt_vmi_memory_domain_bytes", "The amount of memory in bytes allocated to the domain (the memory of its domain XML).", gauge, nil},
	{"kubevirt_vmi_memory_actual_balloon_bytes", "Current balloon size in bytes.", gauge, nil},
	{"kubevirt_vmi_memory_resident_bytes", "Resident set size of the process running the domain.", gauge, nil},
	{"kubevirt_vmi_memory_available_bytes", "Amount of usable memory as seen by the domain (needs a balloon driver in the guest).", gauge, nil},
	{"kubevirt_vmi_memory_unused_bytes", "The amount of memory left completely unused by the guest.", gauge, nil},
	{"kubevirt_vmi_memory_usable_bytes", "The amount of memory which can be reclaimed by balloon without pushing the guest system to swap.", gauge, nil},
	{"kubevirt_vmi_memory_cached_bytes", "The amount of memory the guest uses to cache I/O, which can be reclaimed.", gauge, nil},
	{"kubevirt_vmi_memory_swap_in_traffic_bytes", "The total amount of data read from swap space of the guest in bytes.", gauge, nil},
	{"kubevirt_vmi_memory_swap_out_traffic_bytes", "The total amount of memory written out to swap space of the guest in bytes.", gauge, nil},
	{"kubevirt_vmi_memory_pgmajfault_total", "The number of page faults of the guest when disk IO was required.", counter, nil},
	{"kubevirt_vmi_memory_pgminfault_total", "The number of other page faults of the guest, when disk IO was not required.", counter, nil},
	{"kubevirt_vmi_network_receive_bytes_total", "Total network traffic received in bytes.", counter, ifaceL},
	{"kubevirt_vmi_network_receive_packets_total", "Total network traffic received packets.", counter, ifaceL},
	{"kubevirt_vmi_network_receive_errors_total", "Total network received error packets.", counter, ifaceL},
	{"kubevirt_vmi_network_receive_packets_dropped_total", "The total number of rx packets dropped on vNIC interfaces.", counter, ifaceL},
	{"kubevirt_vmi_network_transmit_bytes_total", "Total network traffic transmitted in bytes.", counter, ifaceL},
	{"kubevirt_vmi_network_transmit_packets_total", "Total network traffic transmitted packets.", counter, ifaceL},
	{"kubevirt_vmi_network_transmit_errors_total", "Total network transmitted error packets.", counter, ifaceL},
	{"kubevirt_vmi_network_transmit_packets_dropped_total", "The total number of tx packets dropped on vNIC interfaces.", counter, ifaceL},
	{"kubevirt_vmi_storage_iops_read_total", "Total number of I/O read operations.", counter, driveL},
	{"kubevirt_vmi_storage_read_traffic_bytes_total", "Total number of bytes read from storage.", counter, driveL},
	{"kubevirt_vmi_storage_read_times_seconds_total", "Total time spent on read operations.", counter, driveL},
	{"kubevirt_vmi_storage_iops_write_total", "Total number of I/O write operations.", counter, driveL},
	{"kubevirt_vmi_storage_write_traffic_bytes_total", "Total number of written bytes.", counter, driveL},
	{"kubevirt_vmi_storage_write_times_seconds_total", "Total time spent on write operations.", counter, driveL},
	{"kubevirt_vmi_storage_flush_requests_total", "Total storage flush requests.", counter, driveL},
	{"kubevirt_vmi_storage_flush_times_seconds_total", "Total time spent on cache flushing.", counter, driveL},
}

// Sample is one value of a family: its labels besides vmiLabels, in the family's order.
type Sample struct {
	Family string
	Labels []string
	Value  float64
}

// Samples are the values of one VMI's statistics; what libvirt did not report has no sample.
func Samples(st launcherapi.DomainStats) []Sample {
	var out []Sample
	add := func(family string, v *uint64, scale float64, labels ...string) {
		if v != nil {
			out = append(out, Sample{Family: family, Labels: labels, Value: float64(*v) * scale})
		}
	}
	const seconds, one = 1e-9, 1.0
	if c := st.CPU; c != nil {
		add("kubevirt_vmi_cpu_usage_seconds_total", c.TimeNanoseconds, seconds)
		add("kubevirt_vmi_cpu_user_usage_seconds_total", c.UserNanoseconds, seconds)
		add("kubevirt_vmi_cpu_system_usage_seconds_total", c.SystemNanoseconds, seconds)
	}
	for _, v := range st.VCPUs {
		id := strconv.Itoa(v.ID)
		add("kubevirt_vmi_vcpu_seconds_total", v.TimeNanoseconds, seconds, id, v.State)
		add("kubevirt_vmi_vcpu_wait_seconds_total", v.WaitNanoseconds, seconds, id)
		add("kubevirt_vmi_vcpu_delay_seconds_total", v.DelayNanoseconds, seconds, id)
	}
	if m := st.Memory; m != nil {
		add("kubevirt_vmi_memory_domain_bytes", m.DomainBytes, one)
		add("kubevirt_vmi_memory_actual_balloon_bytes", m.ActualBalloonBytes, one)
		add("kubevirt_vmi_memory_resident_bytes", m.ResidentBytes, one)
		add("kubevirt_vmi_memory_available_bytes", m.AvailableBytes, one)
		add("kubevirt_vmi_memory_unused_bytes", m.UnusedBytes, one)
		add("kubevirt_vmi_memory_usable_bytes", m.UsableBytes, one)
		add("kubevirt_vmi_memory_cached_bytes", m.CachedBytes, one)
		add("kubevirt_vmi_memory_swap_in_traffic_bytes", m.SwapInBytes, one)
		add("kubevirt_vmi_memory_swap_out_traffic_bytes", m.SwapOutBytes, one)
		add("kubevirt_vmi_memory_pgmajfault_total", m.MajorFaults, one)
		add("kubevirt_vmi_memory_pgminfault_total", m.MinorFaults, one)
	}
	for _, n := range st.Interfaces {
		add("kubevirt_vmi_network_receive_bytes_total", n.RxBytes, one, n.Name)
		add("kubevirt_vmi_network_receive_packets_total", n.RxPackets, one, n.Name)
		add("kubevirt_vmi_network_receive_errors_total", n.RxErrors, one, n.Name)
		add("kubevirt_vmi_network_receive_packets_dropped_total", n.RxDropped, one, n.Name)
		add("kubevirt_vmi_network_transmit_bytes_total", n.TxBytes, one, n.Name)
		add("kubevirt_vmi_network_transmit_packets_total", n.TxPackets, one, n.Name)
		add("kubevirt_vmi_network_transmit_errors_total", n.TxErrors, one, n.Name)
		add("kubevirt_vmi_network_transmit_packets_dropped_total", n.TxDropped, one, n.Name)
	}
	for _, d := range st.Disks {
		add("kubevirt_vmi_storage_iops_read_total", d.ReadRequests, one, d.Name)
		add("kubevirt_vmi_storage_read_traffic_bytes_total", d.ReadBytes, one, d.Name)
		add("kubevirt_vmi_storage_read_times_seconds_total", d.ReadNanoseconds, seconds, d.Name)
		add("kubevirt_vmi_storage_iops_write_total", d.WriteRequests, one, d.Name)
		add("kubevirt_vmi_storage_write_traffic_bytes_total", d.WriteBytes, one, d.Name)
		add("kubevirt_vmi_storage_write_times_seconds_total", d.WriteNanoseconds, seconds, d.Name)
		add("kubevirt_vmi_storage_flush_requests_total", d.FlushRequests, one, d.Name)
		add("kubevirt_vmi_storage_flush_times_seconds_total", d.FlushNanoseconds, seconds, d.Name)
	}
	return out
}
