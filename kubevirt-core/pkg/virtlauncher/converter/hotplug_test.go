package converter

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestHotplugControllers(t *testing.T) {
	spec := &kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
		Disks:      []kubevirtv1.Disk{{Name: "a"}, {Name: "b"}},
		Interfaces: []kubevirtv1.Interface{{Name: "default"}},
	}}}
	noHotplug := spec.DeepCopy()
	noHotplug.Domain.Devices.DisableHotplug = true
	for _, tc := range []struct {
		machine string
		spec    *kubevirtv1.VirtualMachineInstanceSpec
		want    int // root ports
	}{
		{"q35", spec, 2 + 1 + fixedPCIeDevices + hotplugRootPorts},
		{"pc-q35-rhel9.6.0", spec, 2 + 1 + fixedPCIeDevices + hotplugRootPorts},
		{"q35", noHotplug, 2 + 1 + fixedPCIeDevices},
		{"pc", spec, 0},
	} {
		got := hotplugControllers(tc.machine, tc.spec)
		ports := 0
		for i, c := range got {
			if i == 0 && (c.Model != "pcie-root" || *c.Index != 0) {
				t.Errorf("%s: first controller %+v, want pcie-root at index 0", tc.machine, c)
			}
			if c.Model == "pcie-root-port" {
				ports++
				if *c.Index != uint(ports) {
					t.Errorf("%s: root port %d has index %d", tc.machine, ports, *c.Index)
				}
			}
		}
		if ports != tc.want {
			t.Errorf("%s: %d root ports, want %d", tc.machine, ports, tc.want)
		}
	}
}

func TestHotplugDisk(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Name, vmi.Namespace = "vm", "ns"
	vmi.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{
		{Name: "root"},
		{Name: "hot", Serial: "s1", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
		{Name: "scsi", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}},
	}
	pvc := func(name string) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}}}
	}
	vmi.Spec.Volumes = []kubevirtv1.Volume{pvc("root"), pvc("hot"), pvc("scsi")}
	for _, tc := range []struct {
		name string
		used []string
		want string
	}{
		{"hot", []string{"vda", "vdb"}, "vdc"},
		{"hot", []string{"vda", "vdc"}, "vdb"},
		{"scsi", []string{"vda", "sda"}, "sdb"},
	} {
		d, err := HotplugDisk(vmi, tc.name, "/d/disk.img", tc.used)
		if err != nil {
			t.Fatal(err)
		}
		if d.Target.Dev != tc.want || d.Source.File.File != "/d/disk.img" || d.Alias.Name != AliasPrefix+tc.name {
			t.Errorf("%s with %v: target %s, source %s, alias %s; want %s", tc.name, tc.used, d.Target.Dev, d.Source.File.File, d.Alias.Name, tc.want)
		}
	}
	if _, err := HotplugDisk(vmi, "nope", "/x", nil); err == nil {
		t.Error("a disk the VMI lacks converted")
	}
}
