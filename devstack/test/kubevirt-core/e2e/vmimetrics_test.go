package e2e

import (
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// vmiSeries are the per-VMI metrics virt-handler must export for a running guest that booted from
// its root disk and took its address over the pod network: the vCPU ran, QEMU has a resident
// set, the root disk was read and the NIC carried the DHCP exchange.
func vmiSeries(vmi *kubevirtv1.VirtualMachineInstance) []series {
	of := func(extra map[string]string) map[string]string {
		l := map[string]string{"node": vmi.Status.NodeName, "namespace": vmi.Namespace, "name": vmi.Name}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	return []series{
		{"kubevirt_vmi_vcpu_seconds_total", of(map[string]string{"id": "0"}), 1e-3},
		{"kubevirt_vmi_cpu_usage_seconds_total", of(nil), 1e-3},
		{"kubevirt_vmi_memory_resident_bytes", of(nil), 1 << 20},
		{"kubevirt_vmi_memory_domain_bytes", of(nil), 1 << 20},
		{"kubevirt_vmi_storage_read_traffic_bytes_total", of(map[string]string{"drive": "root"}), 1},
		{"kubevirt_vmi_storage_iops_read_total", of(map[string]string{"drive": "root"}), 1},
		{"kubevirt_vmi_network_receive_bytes_total", of(map[string]string{"interface": "default"}), 1},
		{"kubevirt_vmi_network_transmit_bytes_total", of(map[string]string{"interface": "default"}), 1},
	}
}
