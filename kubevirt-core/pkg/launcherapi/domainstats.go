package launcherapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DomainStats is what libvirt counts for the running domain, read when virt-handler asks (on a
// Prometheus scrape). A nil field is one libvirt did not report (a guest without a balloon driver
// has no available or unused memory, for example); a zero is a real zero. Times are nanoseconds
// and sizes bytes, as the launcher converts libvirt's KiB.
type DomainStats struct {
	CPU    *CPUStats    `json:"cpu,omitempty"`
	VCPUs  []VCPUStats  `json:"vcpus,omitempty"`
	Memory *MemoryStats `json:"memory,omitempty"`
	// Interfaces are the domain's NICs named after the VMI's interfaces.
	Interfaces []InterfaceStats `json:"interfaces,omitempty"`
	// Disks are the domain's disks named after the VMI's disks.
	Disks []DiskStats `json:"disks,omitempty"`
}

// CPUStats is the time of the whole QEMU process: the vCPUs and the hypervisor's own threads.
type CPUStats struct {
	TimeNanoseconds   *uint64 `json:"timeNanoseconds,omitempty"`
	UserNanoseconds   *uint64 `json:"userNanoseconds,omitempty"`
	SystemNanoseconds *uint64 `json:"systemNanoseconds,omitempty"`
}

// vCPU states, as KubeVirt's metrics label them.
const (
	VCPUOffline = "offline"
	VCPURunning = "running"
	VCPUBlocked = "blocked"
	VCPUUnknown = "unknown"
)

// VCPUStats is one virtual CPU.
type VCPUStats struct {
	ID int `json:"id"`
	// State is VCPURunning, VCPUBlocked, VCPUOffline or VCPUUnknown.
	State string `json:"state"`
	// TimeNanoseconds is the time the vCPU ran guest code.
	TimeNanoseconds *uint64 `json:"timeNanoseconds,omitempty"`
	// WaitNanoseconds is the time it waited on I/O.
	WaitNanoseconds *uint64 `json:"waitNanoseconds,omitempty"`
	// DelayNanoseconds is the time it was runnable but waited for a host CPU.
	DelayNanoseconds *uint64 `json:"delayNanoseconds,omitempty"`
}

// MemoryStats is libvirt's balloon statistics: the first two always, the guest's view only with
// a balloon driver in the guest.
type MemoryStats struct {
	// DomainBytes is the memory the domain has (the maximum of the balloon).
	DomainBytes *uint64 `json:"domainBytes,omitempty"`
	// ActualBalloonBytes is the balloon's current size: what the guest may use.
	ActualBalloonBytes *uint64 `json:"actualBalloonBytes,omitempty"`
	// ResidentBytes is the resident set of the QEMU process.
	ResidentBytes *uint64 `json:"residentBytes,omitempty"`
	// The guest's own view.
	AvailableBytes *uint64 `json:"availableBytes,omitempty"`
	UnusedBytes    *uint64 `json:"unusedBytes,omitempty"`
	UsableBytes    *uint64 `json:"usableBytes,omitempty"`
	CachedBytes    *uint64 `json:"cachedBytes,omitempty"`
	SwapInBytes    *uint64 `json:"swapInBytes,omitempty"`
	SwapOutBytes   *uint64 `json:"swapOutBytes,omitempty"`
	MajorFaults    *uint64 `json:"majorFaults,omitempty"`
	MinorFaults    *uint64 `json:"minorFaults,omitempty"`
}

// InterfaceStats is one NIC's traffic as the host side of it counts it.
type InterfaceStats struct {
	// Name is the VMI's interface name (spec.domain.devices.interfaces[].name), or libvirt's
	// device name for a NIC the VMI does not name.
	Name      string  `json:"name"`
	RxBytes   *uint64 `json:"rxBytes,omitempty"`
	RxPackets *uint64 `json:"rxPackets,omitempty"`
	RxErrors  *uint64 `json:"rxErrors,omitempty"`
	RxDropped *uint64 `json:"rxDropped,omitempty"`
	TxBytes   *uint64 `json:"txBytes,omitempty"`
	TxPackets *uint64 `json:"txPackets,omitempty"`
	TxErrors  *uint64 `json:"txErrors,omitempty"`
	TxDropped *uint64 `json:"txDropped,omitempty"`
}

// DiskStats is one disk's I/O.
type DiskStats struct {
	// Name is the VMI's disk name (spec.domain.devices.disks[].name), or libvirt's target device
	// for a disk the VMI does not name.
	Name             string  `json:"name"`
	ReadRequests     *uint64 `json:"readRequests,omitempty"`
	ReadBytes        *uint64 `json:"readBytes,omitempty"`
	ReadNanoseconds  *uint64 `json:"readNanoseconds,omitempty"`
	WriteRequests    *uint64 `json:"writeRequests,omitempty"`
	WriteBytes       *uint64 `json:"writeBytes,omitempty"`
	WriteNanoseconds *uint64 `json:"writeNanoseconds,omitempty"`
	FlushRequests    *uint64 `json:"flushRequests,omitempty"`
	FlushNanoseconds *uint64 `json:"flushNanoseconds,omitempty"`
}

// DomainStatsServer reads the domain's statistics from libvirt.
type DomainStatsServer interface {
	// DomainStats fails with FailedPrecondition while no domain runs.
	DomainStats(context.Context, *Empty) (*DomainStats, error)
}

// DomainStats reads the running domain's statistics.
func (c *Client) DomainStats(ctx context.Context) (*DomainStats, error) {
	return invoke[DomainStats](ctx, c, "DomainStats", &Empty{})
}

// UnimplementedDomainStatsServer answers DomainStats with Unimplemented, for fakes without a
// domain.
type UnimplementedDomainStatsServer struct{}

func (UnimplementedDomainStatsServer) DomainStats(context.Context, *Empty) (*DomainStats, error) {
	return nil, status.Error(codes.Unimplemented, "this launcher has no domain statistics")
}
