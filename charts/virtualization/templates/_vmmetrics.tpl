{{/*
metricRelabelings of virt-handler's metrics endpoint: KubeVirt's per-VM metrics (kubevirt_vmi_*)
under the names and labels the reference module gives them (its ServiceMonitor of virt-handler):
kubevirt_vmi_* becomes d8_virtualization_virtualmachine_*, the guest's and the hypervisor's sides
told apart (cpu_usage_seconds_total is the vCPUs', hypervisor_cpu_usage_seconds_total QEMU's), a
disk carries block_device_name and type of the VirtualDisk, VirtualImage or ClusterVirtualImage
it is (the controller names a VMI's disk <vd|vi|cvi>-<name>), a vCPU its core, and namespace is
the VM's. The VMI's name is the VirtualMachine's, so name needs no mapping. Where this differs
from the reference: virt-handler's own metrics (controller_runtime_*, ...) keep their target
labels (job, pod, endpoint ...), only the VM series lose them; drive stays on the disks that are
none of the friendly kinds and interface stays, so that two such devices never make one series.
docs/chart.md lists the names.
*/}}
{{- define "virtualization.vmMetricRelabelings" -}}
- sourceLabels: [__name__, drive]
  regex: kubevirt_vmi_storage_.*;(cvi|vi|vd)-(.+)
  targetLabel: block_device_name
  replacement: $2
{{- range $prefix, $type := dict "vd" "virtualdisk" "vi" "virtualimage" "cvi" "clustervirtualimage" }}
- sourceLabels: [__name__, drive]
  regex: kubevirt_vmi_storage_.*;{{ $prefix }}-.+
  targetLabel: type
  replacement: {{ $type }}
{{- end }}
{{- range $drive := list "cloudinit" "sysprep" }}
- sourceLabels: [__name__, drive]
  regex: kubevirt_vmi_storage_.*;{{ $drive }}
  targetLabel: type
  replacement: {{ $drive }}
{{- end }}
- sourceLabels: [block_device_name]
  regex: .+
  targetLabel: drive
  replacement: ""
- sourceLabels: [__name__, id]
  regex: kubevirt_vmi_vcpu_.*;(.+)
  targetLabel: core
  replacement: $1
- action: drop
  sourceLabels: [__name__]
  regex: kubevirt_vmi_vcpu_wait_seconds_total
{{- range $rename := list
  (list "kubevirt_vmi_storage_(.*)" "block_device_${1}")
  (list "kubevirt_vmi_cpu_((system_|user_)?usage_seconds_total)" "hypervisor_cpu_${1}")
  (list "kubevirt_vmi_vcpu_delay_seconds_total" "cpu_steal_seconds_total")
  (list "kubevirt_vmi_vcpu_seconds_total" "cpu_usage_seconds_total")
  (list "kubevirt_vmi_memory_(cached|resident)_(.+)" "hypervisor_memory_${1}_${2}")
  (list "kubevirt_vmi_memory_actual_balloon_bytes" "memory_min_size_bytes")
  (list "kubevirt_vmi_memory_domain_bytes" "memory_size_bytes")
  (list "kubevirt_vmi_memory_available_bytes" "os_memory_total_bytes")
  (list "kubevirt_vmi_memory_unused_bytes" "os_memory_free_bytes")
  (list "kubevirt_vmi_memory_usable_bytes" "os_memory_potentially_free_bytes")
  (list "kubevirt_vmi_memory_(.*)" "os_memory_${1}")
  (list "kubevirt_vmi_(.*)" "${1}") }}
- sourceLabels: [__name__]
  regex: {{ index $rename 0 }}
  targetLabel: __name__
  replacement: d8_virtualization_virtualmachine_{{ index $rename 1 }}
{{- end }}
- sourceLabels: [exported_namespace]
  regex: (.+)
  targetLabel: namespace
{{- range $label := list "exported_namespace" "id" "pod" "container" "endpoint" "service" }}
- sourceLabels: [__name__]
  regex: d8_virtualization_virtualmachine_.*
  targetLabel: {{ $label }}
  replacement: ""
{{- end }}
{{- end -}}
