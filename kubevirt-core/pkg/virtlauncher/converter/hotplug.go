package converter

import (
	"fmt"
	"strings"

	"libvirt.org/go/libvirtxml"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// hotplugRootPorts is how many PCIe root ports of a q35 domain stay free: a virtio disk plugged
// in later needs a port of its own (KubeVirt keeps spare ports for the same reason).
const hotplugRootPorts = 4

// fixedPCIeDevices bounds the devices besides disks and NICs that libvirt puts on root ports at
// start: balloon, virtio-serial (the agent channel), RNG and the SCSI controller.
const fixedPCIeDevices = 4

// hotplugEnabled tells whether disks may be plugged into the running domain: unless
// spec.domain.devices.disableHotplug says no, as in KubeVirt.
func hotplugEnabled(spec *kubevirtv1.VirtualMachineInstanceSpec) bool {
	return !spec.Domain.Devices.DisableHotplug
}

// hotplugControllers are the PCI controllers of the machine type: on q35, root ports for every
// device the domain starts with (libvirt fills free ports first) plus, unless hotplug is
// disabled, hotplugRootPorts spare ones. i440fx's PCI bus takes hotplugged devices as it is.
func hotplugControllers(machine string, spec *kubevirtv1.VirtualMachineInstanceSpec) []libvirtxml.DomainController {
	if !strings.Contains(machine, "q35") {
		return nil
	}
	ports := len(spec.Domain.Devices.Disks) + len(spec.Domain.Devices.Interfaces) + fixedPCIeDevices
	if hotplugEnabled(spec) {
		ports += hotplugRootPorts
	}
	// Listed after pcie-root (index 0), which libvirt would otherwise add after them, handing
	// index 0 to a root port.
	out := []libvirtxml.DomainController{{Type: "pci", Index: new(uint), Model: "pcie-root"}}
	for i := range uint(ports) {
		index := i + 1
		out = append(out, libvirtxml.DomainController{Type: "pci", Index: &index, Model: "pcie-root-port"})
	}
	return out
}

// HotplugDisk is the libvirt disk of the VMI's disk name, on the file path, for attaching to the
// running domain: converted as at start, then given the first target name of its bus that used
// (the targets the domain has) leaves free.
func HotplugDisk(vmi *kubevirtv1.VirtualMachineInstance, name, path string, used []string) (*libvirtxml.DomainDisk, error) {
	one := vmi.DeepCopy()
	one.Spec.Domain.Devices.Disks = nil
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		if d.Name == name {
			one.Spec.Domain.Devices.Disks = append(one.Spec.Domain.Devices.Disks, d)
		}
	}
	if len(one.Spec.Domain.Devices.Disks) != 1 {
		return nil, fmt.Errorf("no disk %q in the VMI", name)
	}
	disks, _, err := convertDisks(one, ConverterContext{VolumePaths: map[string]string{name: path}})
	if err != nil {
		return nil, err
	}
	disk := disks[0]
	taken := map[string]bool{}
	for _, u := range used {
		taken[u] = true
	}
	prefix := disk.Target.Dev[:2]
	for n := 0; ; n++ {
		if dev := prefix + driveLetters(n); !taken[dev] {
			disk.Target.Dev = dev
			break
		}
	}
	return &disk, nil
}
