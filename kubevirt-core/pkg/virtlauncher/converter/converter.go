// Package converter turns a VirtualMachineInstance into a libvirt domain, as KubeVirt's
// virt-launcher does, for the subset of the API this project runs so far.
//
// The conversion is pure: everything that depends on the node or on files the launcher prepared
// (disk image paths, socket paths, whether KVM exists) comes in through ConverterContext, so the
// result can be unit tested and is the same for the same inputs.
package converter

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
	k8sv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// DefaultMachineType is what KubeVirt uses on x86_64 when neither the VMI nor the cluster picks one.
const DefaultMachineType = "q35"

// AliasPrefix starts the alias of every device named after the VMI (disks, interfaces): libvirt
// keeps user aliases only with this prefix, and status and events map devices back by it.
const AliasPrefix = "ua-"

// GuestAgentChannel is the virtio-serial port qemu-guest-agent talks on, as KubeVirt names it.
const GuestAgentChannel = "org.qemu.guest_agent.0"

// firmwareUUIDNamespace seeds the stable domain UUID of VMIs that carry no firmware UUID, so a
// restarted launcher of the same VMI presents the same SMBIOS UUID to the guest.
var firmwareUUIDNamespace = uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

// ConverterContext is what the launcher knows about the node and the files it prepared.
type ConverterContext struct {
	// Emulation selects TCG (type='qemu') instead of KVM, for nodes without /dev/kvm.
	Emulation bool
	// EmulatorPath is the QEMU binary; empty lets libvirt choose.
	EmulatorPath string
	// VolumePaths maps a volume name to the file the disk uses: the containerDisk overlay, the
	// emptyDisk image, the cloud-init ISO, the hostDisk or the PVC image.
	VolumePaths map[string]string
	// SerialSocket is the unix socket QEMU listens on for the serial console; empty means none.
	SerialSocket string
	// SerialLog, when set, receives a copy of everything the guest prints on the serial port.
	SerialLog string
	// VNCSocket is the unix socket QEMU's VNC server listens on; empty means no graphics.
	VNCSocket string
	// TapNICs are the VMI's interfaces the launcher bound to tap devices it prepared (the pod
	// network's masquerade binding).
	TapNICs []TapNIC
}

// TapNIC is a guest NIC on an existing tap device.
type TapNIC struct {
	// Name is the VMI's interface name.
	Name string
	// Tap is the tap device, which libvirt opens and hands to QEMU.
	Tap string
	// MAC is the guest's MAC; the launcher's DHCP server knows the guest by it.
	MAC string
}

// Domain converts vmi into a libvirt domain. Errors name the VMI field at fault.
func Domain(vmi *kubevirtv1.VirtualMachineInstance, c ConverterContext) (*libvirtxml.Domain, error) {
	if vmi == nil {
		return nil, fmt.Errorf("no VMI")
	}
	spec := &vmi.Spec.Domain
	dom := &libvirtxml.Domain{
		Type: "kvm",
		Name: DomainName(vmi),
		UUID: DomainUUID(vmi),
		// The guest decides how to stop; libvirt then tears QEMU down and the launcher reports the
		// reason. Reboots stay inside the same QEMU, as in KubeVirt.
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		// ACPI is what makes the graceful stop (power button) reach the guest.
		Features: &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}},
		Clock:    &libvirtxml.DomainClock{Offset: "utc"},
		Devices:  &libvirtxml.DomainDeviceList{Emulator: c.EmulatorPath},
	}
	if c.Emulation {
		dom.Type = "qemu"
	}

	mem, err := guestMemory(vmi)
	if err != nil {
		return nil, err
	}
	dom.Memory = &libvirtxml.DomainMemory{Value: uint(mem), Unit: "b"}

	cpu, vcpus, err := convertCPU(spec.CPU, c.Emulation)
	if err != nil {
		return nil, err
	}
	dom.CPU = cpu
	dom.VCPU = &libvirtxml.DomainVCPU{Placement: "static", Value: vcpus}

	machine := DefaultMachineType
	if spec.Machine != nil && spec.Machine.Type != "" {
		machine = spec.Machine.Type
	}
	dom.OS = &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Type: "hvm", Arch: "x86_64", Machine: machine}}
	if spec.Firmware != nil && spec.Firmware.Serial != "" {
		dom.SysInfo = []libvirtxml.DomainSysInfo{{SMBIOS: &libvirtxml.DomainSysInfoSMBIOS{
			System: &libvirtxml.DomainSysInfoSystem{Entry: []libvirtxml.DomainSysInfoEntry{
				{Name: "uuid", Value: dom.UUID},
				{Name: "serial", Value: spec.Firmware.Serial},
			}},
		}}}
		dom.OS.SMBios = &libvirtxml.DomainSMBios{Mode: "sysinfo"}
	}

	disks, needSCSI, err := convertDisks(vmi, c)
	if err != nil {
		return nil, err
	}
	dom.Devices.Disks = disks
	dom.Devices.Controllers = append(dom.Devices.Controllers, hotplugControllers(machine, &vmi.Spec)...)
	// As KubeVirt: a SCSI disk needs the controller, and so does a SCSI disk plugged in later,
	// the bus KubeVirt's client hotplugs on by default (libvirt cannot add a controller live).
	if needSCSI || hotplugEnabled(&vmi.Spec) {
		dom.Devices.Controllers = append(dom.Devices.Controllers, libvirtxml.DomainController{Type: "scsi", Index: new(uint), Model: "virtio-scsi"})
	}

	devices := &spec.Devices
	if c.SerialSocket != "" && enabled(devices.AutoattachSerialConsole) {
		port := uint(0)
		serial := libvirtxml.DomainSerial{
			Source: &libvirtxml.DomainChardevSource{
				UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: c.SerialSocket},
			},
			Target: &libvirtxml.DomainSerialTarget{Port: &port},
		}
		if c.SerialLog != "" {
			serial.Log = &libvirtxml.DomainChardevLog{File: c.SerialLog}
		}
		dom.Devices.Serials = []libvirtxml.DomainSerial{serial}
		// The console element is what libvirt and the guest tooling look for; it aliases serial 0.
		dom.Devices.Consoles = []libvirtxml.DomainConsole{{Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port}}}
	}
	if c.VNCSocket != "" && enabled(devices.AutoattachGraphicsDevice) {
		dom.Devices.Graphics = []libvirtxml.DomainGraphic{{VNC: &libvirtxml.DomainGraphicVNC{Socket: c.VNCSocket}}}
		heads, vram := uint(1), uint(16384)
		dom.Devices.Videos = []libvirtxml.DomainVideo{{Model: libvirtxml.DomainVideoModel{Type: "vga", Heads: heads, VRam: vram}}}
	}
	nics, err := convertTapNICs(vmi, c.TapNICs)
	if err != nil {
		return nil, err
	}
	dom.Devices.Interfaces = nics
	// KubeVirt always offers the guest agent a channel; libvirt picks the socket path and reports
	// whether an agent answers on it.
	dom.Devices.Channels = []libvirtxml.DomainChannel{{
		Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
		Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: GuestAgentChannel}},
	}}
	if devices.Rng != nil {
		dom.Devices.RNGs = []libvirtxml.DomainRNG{{
			Model:   "virtio",
			Backend: &libvirtxml.DomainRNGBackend{Random: &libvirtxml.DomainRNGBackendRandom{Device: "/dev/urandom"}},
		}}
	}
	// libvirt adds a balloon on its own unless told not to; KubeVirt's default is a virtio one.
	balloon := "virtio"
	if !enabled(devices.AutoattachMemBalloon) {
		balloon = "none"
	}
	dom.Devices.MemBalloon = &libvirtxml.DomainMemBalloon{Model: balloon}
	return dom, nil
}

// convertTapNICs attaches each prepared tap device to the guest as the VMI's interface of the
// same name: <interface type='ethernet'> with managed='no', since the launcher created the tap
// and libvirt must neither create nor remove it.
func convertTapNICs(vmi *kubevirtv1.VirtualMachineInstance, taps []TapNIC) ([]libvirtxml.DomainInterface, error) {
	var out []libvirtxml.DomainInterface
	for _, t := range taps {
		idx := -1
		for i, iface := range vmi.Spec.Domain.Devices.Interfaces {
			if iface.Name == t.Name {
				idx = i
				break
			}
		}
		if idx < 0 {
			return nil, fmt.Errorf("spec.domain.devices.interfaces: no interface %q for tap %s", t.Name, t.Tap)
		}
		iface := &vmi.Spec.Domain.Devices.Interfaces[idx]
		field := fmt.Sprintf("spec.domain.devices.interfaces[%d]", idx)
		model := iface.Model
		if model == "" {
			model = kubevirtv1.VirtIO
		}
		if strings.ContainsAny(model, " /<>&'\"") {
			return nil, fmt.Errorf("%s.model: invalid NIC model %q", field, model)
		}
		nic := libvirtxml.DomainInterface{
			Source: &libvirtxml.DomainInterfaceSource{Ethernet: &libvirtxml.DomainInterfaceSourceEthernet{}},
			Target: &libvirtxml.DomainInterfaceTarget{Dev: t.Tap, Managed: "no"},
			MAC:    &libvirtxml.DomainInterfaceMAC{Address: t.MAC},
			Model:  &libvirtxml.DomainInterfaceModel{Type: model},
			Alias:  &libvirtxml.DomainAlias{Name: AliasPrefix + t.Name},
		}
		if iface.BootOrder != nil {
			if *iface.BootOrder == 0 {
				return nil, fmt.Errorf("%s.bootOrder: must be greater than 0", field)
			}
			nic.Boot = &libvirtxml.DomainDeviceBoot{Order: *iface.BootOrder}
		} else {
			// Without a boot order on the NIC, SeaBIOS would try PXE once the disks fail; KubeVirt
			// gives such NICs no ROM for the same reason.
			nic.ROM = &libvirtxml.DomainROM{Enabled: "no"}
		}
		out = append(out, nic)
	}
	return out, nil
}

// DomainName is KubeVirt's domain name for a VMI: <namespace>_<name>, unique per node.
func DomainName(vmi *kubevirtv1.VirtualMachineInstance) string {
	return vmi.Namespace + "_" + vmi.Name
}

// DomainUUID is the VMI's firmware UUID, or a UUID derived from the VMI's UID when it has none.
func DomainUUID(vmi *kubevirtv1.VirtualMachineInstance) string {
	if fw := vmi.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
		return string(fw.UUID)
	}
	return uuid.NewSHA1(firmwareUUIDNamespace, []byte(vmi.UID)).String()
}

func enabled(b *bool) bool { return b == nil || *b }

// guestMemory is the memory the guest sees, in bytes: spec.domain.memory.guest, else the memory
// request, else the limit, as KubeVirt's defaulting does.
func guestMemory(vmi *kubevirtv1.VirtualMachineInstance) (int64, error) {
	spec := &vmi.Spec.Domain
	var q *resource.Quantity
	field := ""
	switch {
	case spec.Memory != nil && spec.Memory.Guest != nil:
		q, field = spec.Memory.Guest, "spec.domain.memory.guest"
	default:
		if r, ok := spec.Resources.Requests[k8sv1.ResourceMemory]; ok {
			q, field = &r, "spec.domain.resources.requests.memory"
		} else if l, ok := spec.Resources.Limits[k8sv1.ResourceMemory]; ok {
			q, field = &l, "spec.domain.resources.limits.memory"
		}
	}
	if q == nil {
		return 0, fmt.Errorf("spec.domain.memory.guest: no guest memory (set it or spec.domain.resources.requests.memory)")
	}
	if q.Value() <= 0 {
		return 0, fmt.Errorf("%s: guest memory must be positive, got %s", field, q.String())
	}
	return q.Value(), nil
}

// convertCPU maps the topology and model. Under TCG the host's CPU model cannot be presented (TCG
// emulates its own), so host-model and host-passthrough fall back to QEMU's default model.
func convertCPU(cpu *kubevirtv1.CPU, emulation bool) (*libvirtxml.DomainCPU, uint, error) {
	sockets, cores, threads := uint(1), uint(1), uint(1)
	model := kubevirtv1.CPUModeHostModel
	if cpu != nil {
		if cpu.Sockets > 0 {
			sockets = uint(cpu.Sockets)
		}
		if cpu.Cores > 0 {
			cores = uint(cpu.Cores)
		}
		if cpu.Threads > 0 {
			threads = uint(cpu.Threads)
		}
		if cpu.Model != "" {
			model = cpu.Model
		}
	}
	out := &libvirtxml.DomainCPU{Topology: &libvirtxml.DomainCPUTopology{Sockets: int(sockets), Cores: int(cores), Threads: int(threads)}}
	switch {
	case model == kubevirtv1.CPUModeHostModel || model == kubevirtv1.CPUModeHostPassthrough:
		if !emulation {
			out.Mode = model
		}
	case strings.ContainsAny(model, " /<>&"):
		return nil, 0, fmt.Errorf("spec.domain.cpu.model: invalid CPU model %q", model)
	default:
		out.Mode = "custom"
		out.Match = "exact"
		out.Model = &libvirtxml.DomainCPUModel{Value: model, Fallback: "allow"}
	}
	return out, sockets * cores * threads, nil
}

// volumeFormat is the image format of the file behind each supported volume type.
func volumeFormat(v *kubevirtv1.Volume) (format string, readOnly bool, ok bool) {
	switch {
	case v.ContainerDisk != nil, v.EmptyDisk != nil, v.Ephemeral != nil:
		// qcow2 files the launcher creates: an overlay over the read-only base image (a
		// containerDisk's, an ephemeral volume's claim), or a sparse scratch disk.
		return "qcow2", false, true
	case v.CloudInitNoCloud != nil, v.CloudInitConfigDrive != nil, v.ConfigMap != nil, v.Secret != nil,
		v.DownwardAPI != nil, v.ServiceAccount != nil, v.Sysprep != nil:
		// ISOs of the guest's configuration, which it must never write into.
		return "raw", true, true
	case v.PersistentVolumeClaim != nil:
		// A claim the Pod mounts read-only cannot be written: its disk is read-only too.
		return "raw", v.PersistentVolumeClaim.ReadOnly, true
	case v.HostDisk != nil:
		return "raw", false, true
	}
	return "", false, false
}

// convertDisks attaches every disk of the VMI to its volume. Target names follow the bus: vdX for
// virtio, sdX for SATA, SCSI and USB, lettered in declaration order as KubeVirt does.
func convertDisks(vmi *kubevirtv1.VirtualMachineInstance, c ConverterContext) ([]libvirtxml.DomainDisk, bool, error) {
	volumes := map[string]*kubevirtv1.Volume{}
	for i := range vmi.Spec.Volumes {
		volumes[vmi.Spec.Volumes[i].Name] = &vmi.Spec.Volumes[i]
	}
	next := map[string]int{}
	needSCSI := false
	var out []libvirtxml.DomainDisk
	for i, d := range vmi.Spec.Domain.Devices.Disks {
		field := fmt.Sprintf("spec.domain.devices.disks[%d]", i)
		vol, ok := volumes[d.Name]
		if !ok {
			return nil, false, fmt.Errorf("%s: volume %q not found", field, d.Name)
		}
		format, readOnly, ok := volumeFormat(vol)
		if !ok {
			return nil, false, fmt.Errorf("%s: volume %q: volume type not supported by this launcher", field, d.Name)
		}
		path := c.VolumePaths[d.Name]
		if path == "" && hotplug.Pluggable(vol) {
			// Hotplugged disks join the running domain once virt-handler brings their volume.
			continue
		}
		if path == "" {
			return nil, false, fmt.Errorf("%s: volume %q: no file prepared for it", field, d.Name)
		}

		device, bus := "disk", kubevirtv1.DiskBusVirtio
		switch {
		case d.LUN != nil:
			return nil, false, fmt.Errorf("%s.lun: LUN disks are not supported", field)
		case d.CDRom != nil:
			device, bus = "cdrom", kubevirtv1.DiskBusSATA
			if d.CDRom.Bus != "" {
				bus = d.CDRom.Bus
			}
			// A cdrom is read-only unless explicitly made writable.
			if d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly {
				readOnly = true
			}
		case d.Disk != nil:
			if d.Disk.Bus != "" {
				bus = d.Disk.Bus
			}
			readOnly = readOnly || d.Disk.ReadOnly
		}
		prefix := "sd"
		switch bus {
		case kubevirtv1.DiskBusVirtio:
			if device == "cdrom" {
				return nil, false, fmt.Errorf("%s.cdrom.bus: virtio is not a cdrom bus", field)
			}
			prefix = "vd"
		case kubevirtv1.DiskBusSCSI:
			needSCSI = true
		case kubevirtv1.DiskBusSATA, kubevirtv1.DiskBusUSB:
		default:
			return nil, false, fmt.Errorf("%s: unsupported disk bus %q", field, bus)
		}
		dev := prefix + driveLetters(next[prefix])
		next[prefix]++

		disk := libvirtxml.DomainDisk{
			Device: device,
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format, Cache: string(d.Cache)},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: path}},
			Target: &libvirtxml.DomainDiskTarget{Dev: dev, Bus: string(bus)},
			Serial: d.Serial,
			// The alias lets events and status map the device back to the VMI's disk name.
			Alias: &libvirtxml.DomainAlias{Name: AliasPrefix + d.Name},
		}
		if vol.PersistentVolumeClaim != nil && launcherapi.BlockVolume(vmi, d.Name) {
			// The claim's device node itself, which libvirt attaches as <disk type='block'>.
			disk.Source = &libvirtxml.DomainDiskSource{Block: &libvirtxml.DomainDiskSourceBlock{Dev: path}}
		}
		if readOnly {
			disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
		}
		if d.BootOrder != nil {
			if *d.BootOrder == 0 {
				return nil, false, fmt.Errorf("%s.bootOrder: must be greater than 0", field)
			}
			disk.Boot = &libvirtxml.DomainDeviceBoot{Order: *d.BootOrder}
		}
		out = append(out, disk)
	}
	return out, needSCSI, nil
}

// driveLetters names the n-th drive like the kernel: a..z, aa..az, ba...
func driveLetters(n int) string {
	s := ""
	for n++; n > 0; n = (n - 1) / 26 {
		s = string(rune('a'+(n-1)%26)) + s
	}
	return s
}
