// Package domstats turns libvirt's statistics of a domain into the launcher protocol's
// DomainStats: libvirt's KiB into bytes, and its device names (the tap a NIC is plugged into, the
// target of a disk) into the VMI's interface and disk names, read from the aliases the converter
// gives every device.
package domstats

import (
	"strings"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// Types are the statistics asked of libvirt. Block and interface counters come from QEMU at
// once; the balloon's guest view is what the driver last reported.
const Types = libvirt.DOMAIN_STATS_CPU_TOTAL | libvirt.DOMAIN_STATS_BALLOON | libvirt.DOMAIN_STATS_VCPU |
	libvirt.DOMAIN_STATS_INTERFACE | libvirt.DOMAIN_STATS_BLOCK

// Flags make libvirt answer with what it has without waiting for a busy domain job (a
// migration), so that a scrape never blocks on one.
const Flags = libvirt.CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT

// Names maps libvirt's device names to the VMI's.
type Names struct {
	// Interfaces maps a NIC's target device (the tap) to the VMI interface name.
	Interfaces map[string]string
	// Disks maps a disk's target device (vda, sda) to the VMI disk name.
	Disks map[string]string
}

// NamesOf reads the VMI's names of the domain's devices from their aliases (converter.AliasPrefix
// and the VMI's name). Devices without such an alias are left out and keep libvirt's names.
func NamesOf(d *libvirtxml.Domain) Names {
	n := Names{Interfaces: map[string]string{}, Disks: map[string]string{}}
	if d.Devices == nil {
		return n
	}
	for _, nic := range d.Devices.Interfaces {
		if name, ok := vmiName(nic.Alias); ok && nic.Target != nil && nic.Target.Dev != "" {
			n.Interfaces[nic.Target.Dev] = name
		}
	}
	for _, disk := range d.Devices.Disks {
		if name, ok := vmiName(disk.Alias); ok && disk.Target != nil && disk.Target.Dev != "" {
			n.Disks[disk.Target.Dev] = name
		}
	}
	return n
}

func vmiName(a *libvirtxml.DomainAlias) (string, bool) {
	if a == nil {
		return "", false
	}
	name, ok := strings.CutPrefix(a.Name, converter.AliasPrefix)
	return name, ok && name != ""
}

// Convert is the protocol's view of one domain's statistics.
func Convert(st libvirt.DomainStats, names Names) launcherapi.DomainStats {
	var out launcherapi.DomainStats
	if c := st.Cpu; c != nil {
		out.CPU = &launcherapi.CPUStats{
			TimeNanoseconds:   opt(c.TimeSet, c.Time),
			UserNanoseconds:   opt(c.UserSet, c.User),
			SystemNanoseconds: opt(c.SystemSet, c.System),
		}
	}
	for i, v := range st.Vcpu {
		out.VCPUs = append(out.VCPUs, launcherapi.VCPUStats{
			ID:               i,
			State:            vcpuState(v.StateSet, v.State),
			TimeNanoseconds:  opt(v.TimeSet, v.Time),
			WaitNanoseconds:  opt(v.WaitSet, v.Wait),
			DelayNanoseconds: opt(v.DelaySet, v.Delay),
		})
	}
	if b := st.Balloon; b != nil {
		out.Memory = &launcherapi.MemoryStats{
			DomainBytes:        kib(b.MaximumSet, b.Maximum),
			ActualBalloonBytes: kib(b.CurrentSet, b.Current),
			ResidentBytes:      kib(b.RssSet, b.Rss),
			AvailableBytes:     kib(b.AvailableSet, b.Available),
			UnusedBytes:        kib(b.UnusedSet, b.Unused),
			UsableBytes:        kib(b.UsableSet, b.Usable),
			CachedBytes:        kib(b.DiskCachesSet, b.DiskCaches),
			SwapInBytes:        kib(b.SwapInSet, b.SwapIn),
			SwapOutBytes:       kib(b.SwapOutSet, b.SwapOut),
			MajorFaults:        opt(b.MajorFaultSet, b.MajorFault),
			MinorFaults:        opt(b.MinorFaultSet, b.MinorFault),
		}
	}
	for _, n := range st.Net {
		if !n.NameSet {
			continue
		}
		out.Interfaces = append(out.Interfaces, launcherapi.InterfaceStats{
			Name:      renamed(names.Interfaces, n.Name),
			RxBytes:   opt(n.RxBytesSet, n.RxBytes),
			RxPackets: opt(n.RxPktsSet, n.RxPkts),
			RxErrors:  opt(n.RxErrsSet, n.RxErrs),
			RxDropped: opt(n.RxDropSet, n.RxDrop),
			TxBytes:   opt(n.TxBytesSet, n.TxBytes),
			TxPackets: opt(n.TxPktsSet, n.TxPkts),
			TxErrors:  opt(n.TxErrsSet, n.TxErrs),
			TxDropped: opt(n.TxDropSet, n.TxDrop),
		})
	}
	for _, b := range st.Block {
		// Without the backing-chain flag each disk comes once; a record without a name
		// cannot be told apart from the others.
		if !b.NameSet {
			continue
		}
		out.Disks = append(out.Disks, launcherapi.DiskStats{
			Name:             renamed(names.Disks, b.Name),
			ReadRequests:     opt(b.RdReqsSet, b.RdReqs),
			ReadBytes:        opt(b.RdBytesSet, b.RdBytes),
			ReadNanoseconds:  opt(b.RdTimesSet, b.RdTimes),
			WriteRequests:    opt(b.WrReqsSet, b.WrReqs),
			WriteBytes:       opt(b.WrBytesSet, b.WrBytes),
			WriteNanoseconds: opt(b.WrTimesSet, b.WrTimes),
			FlushRequests:    opt(b.FlReqsSet, b.FlReqs),
			FlushNanoseconds: opt(b.FlTimesSet, b.FlTimes),
		})
	}
	return out
}

func renamed(names map[string]string, dev string) string {
	if n, ok := names[dev]; ok {
		return n
	}
	return dev
}

func vcpuState(set bool, s libvirt.VcpuState) string {
	if !set {
		return launcherapi.VCPUUnknown
	}
	switch s {
	case libvirt.VCPU_OFFLINE:
		return launcherapi.VCPUOffline
	case libvirt.VCPU_RUNNING:
		return launcherapi.VCPURunning
	case libvirt.VCPU_BLOCKED:
		return launcherapi.VCPUBlocked
	}
	return launcherapi.VCPUUnknown
}

func opt(set bool, v uint64) *uint64 {
	if !set {
		return nil
	}
	return &v
}

func kib(set bool, v uint64) *uint64 { return opt(set, v*1024) }
