package converter

import (
	"strings"
	"testing"

	k8sv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"
)

func ptr[T any](v T) *T { return &v }

func baseVMI() *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm1", Namespace: "ns1", UID: "0b8c4c1e-7f7e-4b5e-9a55-1f2d8d4c0001"},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				Memory: &kubevirtv1.Memory{Guest: ptr(resource.MustParse("128Mi"))},
				Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{
					{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
					{Name: "cloudinit", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}},
				}},
			},
			Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "tiny"}}},
				{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
			},
		},
	}
}

func baseContext() ConverterContext {
	return ConverterContext{
		Emulation:    true,
		SerialSocket: "/run/l/serial.sock",
		VNCSocket:    "/run/l/vnc.sock",
		VolumePaths: map[string]string{
			"root":      "/run/l/root.qcow2",
			"cloudinit": "/run/l/noCloud.iso",
			"scratch":   "/run/l/scratch.qcow2",
			"data":      "/pvc/data/disk.img",
			"host":      "/srv/host.img",
		},
	}
}

func TestDomain(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*kubevirtv1.VirtualMachineInstance, *ConverterContext)
		want    []string // substrings of the marshalled XML
		notWant []string
		check   func(*testing.T, *libvirtxml.Domain)
	}{
		{
			name: "defaults under TCG",
			want: []string{
				`<domain type="qemu">`,
				`<name>ns1_vm1</name>`,
				`<memory unit="b">134217728</memory>`,
				`<vcpu placement="static">1</vcpu>`,
				`<topology sockets="1" cores="1" threads="1"></topology>`,
				`machine="q35"`,
				`<on_poweroff>destroy</on_poweroff>`,
				`<acpi></acpi>`,
				`<driver name="qemu" type="qcow2"></driver>`,
				`<source file="/run/l/root.qcow2"></source>`,
				`<target dev="vda" bus="virtio"></target>`,
				`<source file="/run/l/noCloud.iso"></source>`,
				`<target dev="vdb" bus="virtio"></target>`,
				`<readonly></readonly>`,
				`<source mode="bind" path="/run/l/serial.sock"></source>`,
				`<console>`,
				`<graphics type="vnc" socket="/run/l/vnc.sock">`,
				`<memballoon model="virtio">`,
				`<channel type="unix">`,
				`<target type="virtio" name="org.qemu.guest_agent.0"></target>`,
				// For disks hotplugged on SCSI, KubeVirt's client's default bus.
				`<controller type="scsi" index="0" model="virtio-scsi">`,
			},
			// TCG cannot present the host CPU.
			notWant: []string{`host-model`, `<interface`, `<rng`},
		},
		{
			name: "KVM, topology, machine type, firmware UUID, rng",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				c.Emulation = false
				v.Spec.Domain.CPU = &kubevirtv1.CPU{Sockets: 2, Cores: 2, Threads: 1}
				v.Spec.Domain.Machine = &kubevirtv1.Machine{Type: "pc"}
				v.Spec.Domain.Firmware = &kubevirtv1.Firmware{UUID: "5d307ca9-b3ef-428c-8861-06e72d69f223"}
				v.Spec.Domain.Devices.Rng = &kubevirtv1.Rng{}
			},
			want: []string{
				`<domain type="kvm">`,
				`<uuid>5d307ca9-b3ef-428c-8861-06e72d69f223</uuid>`,
				`<vcpu placement="static">4</vcpu>`,
				`<cpu mode="host-model">`,
				`machine="pc"`,
				`<rng model="virtio">`,
			},
			// Without VMI interfaces there is no NIC.
			notWant: []string{`<interface`, `<mac `},
		},
		{
			name: "pod network on a prepared tap",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				v.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}}
				c.TapNICs = []TapNIC{{Name: "default", Tap: "tap0", MAC: "02:00:00:00:00:01"}}
			},
			want: []string{
				`<interface type="ethernet">`,
				`<mac address="02:00:00:00:00:01"></mac>`,
				`<target dev="tap0" managed="no"></target>`,
				`<model type="virtio"></model>`,
				`<alias name="ua-default"></alias>`,
				// No boot order: no option ROM, so the firmware never tries PXE.
				`<rom enabled="no"></rom>`,
			},
			notWant: []string{`type="user"`, `<boot order`},
		},
		{
			name: "tap NIC with the VMI's model and boot order",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				v.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", Model: "e1000", BootOrder: ptr(uint(2))}}
				c.TapNICs = []TapNIC{{Name: "default", Tap: "tap0", MAC: "02:00:00:00:00:01"}}
			},
			want:    []string{`<model type="e1000"></model>`, `<boot order="2"></boot>`},
			notWant: []string{`<rom`},
		},
		{
			name: "hotplug disabled: no SCSI controller without a SCSI disk",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, _ *ConverterContext) {
				v.Spec.Domain.Devices.DisableHotplug = true
			},
			notWant: []string{`<controller type="scsi"`},
		},
		{
			name: "memory from requests, named CPU model, no serial or VNC",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				v.Spec.Domain.Memory = nil
				v.Spec.Domain.Resources.Requests = k8sv1.ResourceList{k8sv1.ResourceMemory: resource.MustParse("256Mi")}
				v.Spec.Domain.CPU = &kubevirtv1.CPU{Model: "qemu64"}
				v.Spec.Domain.Devices.AutoattachSerialConsole = ptr(false)
				v.Spec.Domain.Devices.AutoattachGraphicsDevice = ptr(false)
				v.Spec.Domain.Devices.AutoattachMemBalloon = ptr(false)
			},
			want:    []string{`<memory unit="b">268435456</memory>`, `<model fallback="allow">qemu64</model>`, `<memballoon model="none">`},
			notWant: []string{`<serial`, `<console`, `<graphics`},
		},
		{
			name: "all volume types, buses and boot order",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				v.Spec.Domain.Devices.Disks[0].BootOrder = ptr(uint(1))
				v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks,
					kubevirtv1.Disk{Name: "scratch", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}},
					kubevirtv1.Disk{Name: "data", Serial: "D1", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSATA}}},
					kubevirtv1.Disk{Name: "host", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSCSI}}},
				)
				v.Spec.Volumes = append(v.Spec.Volumes,
					kubevirtv1.Volume{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}}},
					kubevirtv1.Volume{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}},
					kubevirtv1.Volume{Name: "host", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: "/srv/host.img"}}},
				)
			},
			want: []string{
				`<boot order="1"></boot>`,
				`<target dev="sda" bus="scsi"></target>`,
				`<target dev="sdb" bus="sata"></target>`,
				`<serial>D1</serial>`,
				`<disk type="file" device="cdrom">`,
				`<target dev="sdc" bus="scsi"></target>`,
				`<controller type="scsi" index="0" model="virtio-scsi">`,
				`<alias name="ua-data"></alias>`,
			},
		},
		{
			name: "config ISOs read-only, sysprep a cdrom, an ephemeral claim's overlay a qcow2 file",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
				v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks,
					kubevirtv1.Disk{Name: "cm", DiskDevice: virtio},
					kubevirtv1.Disk{Name: "unattend", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA}}},
					kubevirtv1.Disk{Name: "golden", DiskDevice: virtio})
				v.Spec.Volumes = append(v.Spec.Volumes,
					kubevirtv1.Volume{Name: "cm", VolumeSource: kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{}}},
					kubevirtv1.Volume{Name: "unattend", VolumeSource: kubevirtv1.VolumeSource{Sysprep: &kubevirtv1.SysprepSource{}}},
					kubevirtv1.Volume{Name: "golden", VolumeSource: kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{}}})
				// The overlay is a file, whatever the claim's volume mode.
				v.Status.VolumeStatus = []kubevirtv1.VolumeStatus{
					{Name: "golden", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{VolumeMode: ptr(k8sv1.PersistentVolumeBlock)}}}
				c.VolumePaths["cm"] = "/run/l/configMap-cm.iso"
				c.VolumePaths["unattend"] = "/run/l/sysprep-unattend.iso"
				c.VolumePaths["golden"] = "/run/l/ephemeral-golden.qcow2"
			},
			want: []string{
				`<source file="/run/l/configMap-cm.iso"></source>`,
				`<target dev="vdc" bus="virtio"></target>`,
				`<source file="/run/l/sysprep-unattend.iso"></source>`,
				`<target dev="sda" bus="sata"></target>`,
				`<source file="/run/l/ephemeral-golden.qcow2"></source>`,
				`<target dev="vdd" bus="virtio"></target>`,
			},
			check: func(t *testing.T, dom *libvirtxml.Domain) {
				for _, d := range dom.Devices.Disks {
					readOnly := d.ReadOnly != nil
					switch d.Alias.Name {
					case "ua-cm", "ua-unattend":
						if d.Driver.Type != "raw" || !readOnly {
							t.Errorf("%s: driver %s, read-only %v; want a read-only raw ISO", d.Alias.Name, d.Driver.Type, readOnly)
						}
					case "ua-golden":
						if d.Driver.Type != "qcow2" || readOnly || d.Source.File == nil {
							t.Errorf("golden: driver %s, read-only %v, source %+v; want a writable qcow2 file", d.Driver.Type, readOnly, d.Source)
						}
					}
				}
				if d := dom.Devices.Disks[3]; d.Device != "cdrom" {
					t.Errorf("sysprep is a %s", d.Device)
				}
			},
		},
		{
			name: "block claim, read-only filesystem claim, hostDisk and config drive",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
				v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks,
					kubevirtv1.Disk{Name: "blk", DiskDevice: virtio}, kubevirtv1.Disk{Name: "data", DiskDevice: virtio},
					kubevirtv1.Disk{Name: "host", DiskDevice: virtio})
				v.Spec.Volumes[1].VolumeSource = kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserData: "#!/bin/sh\n"}}
				claim := kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}
				readOnly := kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: k8sv1.PersistentVolumeClaimVolumeSource{ReadOnly: true}}}
				v.Spec.Volumes = append(v.Spec.Volumes, kubevirtv1.Volume{Name: "blk", VolumeSource: claim},
					kubevirtv1.Volume{Name: "data", VolumeSource: readOnly},
					kubevirtv1.Volume{Name: "host", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: "/srv/host.img"}}})
				v.Status.VolumeStatus = []kubevirtv1.VolumeStatus{
					{Name: "blk", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{VolumeMode: ptr(k8sv1.PersistentVolumeBlock)}},
					{Name: "data", PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{VolumeMode: ptr(k8sv1.PersistentVolumeFilesystem)}},
				}
				c.VolumePaths["blk"] = "/dev/blk"
			},
			want: []string{
				`<disk type="block" device="disk">`,
				`<source dev="/dev/blk"></source>`,
				`<source file="/pvc/data/disk.img"></source>`,
				`<source file="/srv/host.img"></source>`,
				`<target dev="vde" bus="virtio"></target>`,
			},
			notWant: []string{`<source file="/dev/blk">`},
			check: func(t *testing.T, dom *libvirtxml.Domain) {
				// A claim mounted read-only (an image kept on one) is a read-only disk, though
				// the disk itself does not say so.
				want := map[string]bool{"ua-blk": false, "ua-data": true, "ua-host": false}
				for _, d := range dom.Devices.Disks {
					if ro, ok := want[d.Alias.Name]; ok && (d.ReadOnly != nil) != ro {
						t.Errorf("%s: read-only %v, want %v", d.Alias.Name, d.ReadOnly != nil, ro)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi, ctx := baseVMI(), baseContext()
			if tt.mutate != nil {
				tt.mutate(vmi, &ctx)
			}
			dom, err := Domain(vmi, ctx)
			if err != nil {
				t.Fatalf("Domain: %v", err)
			}
			xml, err := dom.Marshal()
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			for _, s := range tt.want {
				if !strings.Contains(xml, s) {
					t.Errorf("missing %s in\n%s", s, xml)
				}
			}
			for _, s := range tt.notWant {
				if strings.Contains(xml, s) {
					t.Errorf("unexpected %s in\n%s", s, xml)
				}
			}
			if tt.check != nil {
				tt.check(t, dom)
			}
		})
	}
}

func TestDomainErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*kubevirtv1.VirtualMachineInstance, *ConverterContext)
		want   string
	}{
		{
			name: "disk without volume",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, _ *ConverterContext) {
				v.Spec.Domain.Devices.Disks[1].Name = "x"
			},
			want: `spec.domain.devices.disks[1]: volume "x" not found`,
		},
		{
			name: "no memory",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, _ *ConverterContext) {
				v.Spec.Domain.Memory = nil
			},
			want: `spec.domain.memory.guest: no guest memory`,
		},
		{
			name: "no prepared file",
			mutate: func(_ *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				delete(c.VolumePaths, "root")
			},
			want: `spec.domain.devices.disks[0]: volume "root": no file prepared`,
		},
		{
			name: "unsupported volume type",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, _ *ConverterContext) {
				v.Spec.Volumes[0].VolumeSource = kubevirtv1.VolumeSource{DownwardMetrics: &kubevirtv1.DownwardMetricsVolumeSource{}}
			},
			want: `spec.domain.devices.disks[0]: volume "root": volume type not supported`,
		},
		{
			name: "virtio cdrom",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, _ *ConverterContext) {
				v.Spec.Domain.Devices.Disks[1].DiskDevice = kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusVirtio}}
			},
			want: `spec.domain.devices.disks[1].cdrom.bus`,
		},
		{
			name: "tap for an unknown interface",
			mutate: func(_ *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				c.TapNICs = []TapNIC{{Name: "default", Tap: "tap0", MAC: "02:00:00:00:00:01"}}
			},
			want: `no interface "default" for tap tap0`,
		},
		{
			name: "bad NIC model",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				v.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", Model: "e1000'/>"}}
				c.TapNICs = []TapNIC{{Name: "default", Tap: "tap0", MAC: "02:00:00:00:00:01"}}
			},
			want: `spec.domain.devices.interfaces[0].model`,
		},
		{
			name: "zero NIC boot order",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, c *ConverterContext) {
				v.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", BootOrder: ptr(uint(0))}}
				c.TapNICs = []TapNIC{{Name: "default", Tap: "tap0", MAC: "02:00:00:00:00:01"}}
			},
			want: `spec.domain.devices.interfaces[0].bootOrder`,
		},
		{
			name: "zero boot order",
			mutate: func(v *kubevirtv1.VirtualMachineInstance, _ *ConverterContext) {
				v.Spec.Domain.Devices.Disks[0].BootOrder = ptr(uint(0))
			},
			want: `spec.domain.devices.disks[0].bootOrder`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi, ctx := baseVMI(), baseContext()
			tt.mutate(vmi, &ctx)
			_, err := Domain(vmi, ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDomainUUIDStable(t *testing.T) {
	a, b := baseVMI(), baseVMI()
	if DomainUUID(a) != DomainUUID(b) {
		t.Fatal("same UID gave different UUIDs")
	}
	b.UID = "other"
	if DomainUUID(a) == DomainUUID(b) {
		t.Fatal("different UIDs gave the same UUID")
	}
}

func TestDriveLetters(t *testing.T) {
	for n, want := range map[int]string{0: "a", 1: "b", 25: "z", 26: "aa", 27: "ab", 51: "az", 52: "ba"} {
		if got := driveLetters(n); got != want {
			t.Errorf("driveLetters(%d) = %q, want %q", n, got, want)
		}
	}
}
