package vmi

import (
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// genericCPUModels are the baseline models a VM is given to run on any node (the friendly
// Discovery and Features classes use them with features on top). The node labeller never labels
// them (they are obsolete), so they ask for no node.
var genericCPUModels = map[string]bool{
	"":                                true,
	kubevirtv1.CPUModeHostModel:       true,
	kubevirtv1.CPUModeHostPassthrough: true,
	"qemu64":                          true,
	"kvm64":                           true,
}

// launcherNodeSelector is the launcher Pod's node selector: the VMI's own, the node labeller's
// label of a named CPU model and of every feature the VMI requires (policy require, or none),
// as KubeVirt asks, and last the schedulable label: only nodes whose virt-handler is alive may
// run VMs, whatever the VMI asks.
func launcherNodeSelector(vmi *kubevirtv1.VirtualMachineInstance) map[string]string {
	sel := map[string]string{}
	for k, v := range vmi.Spec.NodeSelector {
		sel[k] = v
	}
	if cpu := vmi.Spec.Domain.CPU; cpu != nil {
		if !genericCPUModels[cpu.Model] {
			sel[kubevirtv1.CPUModelLabel+cpu.Model] = "true"
		}
		for _, f := range cpu.Features {
			if f.Policy == "" || f.Policy == "require" {
				sel[kubevirtv1.CPUFeatureLabel+f.Name] = "true"
			}
		}
	}
	sel[kubevirtv1.NodeSchedulable] = "true"
	return sel
}
