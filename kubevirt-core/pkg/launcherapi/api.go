// Package launcherapi is the command protocol between virt-handler and virt-launcher: gRPC over the
// launcher's unix socket, with JSON messages so that no generated code is needed and a message can
// be read in a debugger or with grpcurl's JSON mode.
//
// The launcher serves it; virt-handler dials it through the launcher Pod's sockets volume. The
// handler drives (Sync, Shutdown, Kill, Pause, ...) and the launcher reports (Status, and Watch,
// which streams the domain's status whenever it changes).
package launcherapi

import (
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Paths inside the launcher Pod. virt-handler reaches the same files through the Pod's emptyDir
// volumes on the node (see PodVolumeDir).
const (
	// SocketsVolume is the emptyDir holding the command socket.
	SocketsVolume = "sockets"
	// SocketsDir is where SocketsVolume is mounted in the compute container.
	SocketsDir = "/var/run/kubevirt/sockets"
	// SocketName is the command socket's file name in SocketsDir.
	SocketName = "launcher-sock"
	// PrivateVolume is the emptyDir with the launcher's per-VMI state (disks, ISOs, console).
	PrivateVolume = "private"
	// PrivateDir is where PrivateVolume is mounted; the VMI's state is PrivateDir/<vmi uid>.
	PrivateDir = "/var/run/kubevirt-private"
	// SerialSocketName is the serial console's unix socket in the VMI's state directory.
	SerialSocketName = "serial.sock"
	// VNCSocketName is the VNC server's unix socket in the VMI's state directory.
	VNCSocketName = "vnc.sock"
)

// PodVolumeDir is where a kubelet keeps an emptyDir volume of a Pod in its pods directory on the
// node: <podsDir>/<pod uid>/volumes/kubernetes.io~empty-dir/<volume>.
func PodVolumeDir(podsDir, podUID, volume string) string {
	return filepath.Join(podsDir, podUID, "volumes", "kubernetes.io~empty-dir", volume)
}

// DomainState is the libvirt domain state, as KubeVirt names them.
type DomainState string

const (
	StateNoState  DomainState = "NoState"
	StateRunning  DomainState = "Running"
	StateBlocked  DomainState = "Blocked"
	StatePaused   DomainState = "Paused"
	StateShutdown DomainState = "ShuttingDown"
	StateShutoff  DomainState = "Shutoff"
	StateCrashed  DomainState = "Crashed"
)

// Empty is the message of calls that carry nothing.
type Empty struct{}

// SyncRequest hands the launcher the VMI to run. The first Sync defines and starts the domain;
// later ones are no-ops unless they carry something the launcher can apply live.
type SyncRequest struct {
	VMI *kubevirtv1.VirtualMachineInstance `json:"vmi"`
}

// ShutdownRequest asks the guest to power off (ACPI); after GracePeriodSeconds the launcher
// destroys the domain. Zero means the launcher's own grace period.
type ShutdownRequest struct {
	GracePeriodSeconds int64 `json:"gracePeriodSeconds,omitempty"`
}

// Interface is one guest NIC as the launcher sees it.
type Interface struct {
	// Name is the VMI's interface name (spec.domain.devices.interfaces[].name).
	Name string `json:"name"`
	MAC  string `json:"mac,omitempty"`
	// IPs the guest holds on it, the primary one first.
	IPs []string `json:"ips,omitempty"`
	// InterfaceName is the guest-side device name when known.
	InterfaceName string `json:"interfaceName,omitempty"`
}

// Result tells how a guest that is gone ended, so that the Pod's exit tells a poweroff from a
// crash. It mirrors the launcher's termination message.
type Result struct {
	// Reason is Shutdown (the guest powered off), Destroyed (stopped on request), Crashed or Error.
	Reason   string `json:"reason"`
	Message  string `json:"message,omitempty"`
	ExitCode int    `json:"exitCode"`
}

// DomainStatus is what the launcher knows of its domain.
type DomainStatus struct {
	// Defined is false until the first Sync created the domain.
	Defined bool        `json:"defined"`
	State   DomainState `json:"state,omitempty"`
	// Reason is libvirt's reason for the state (for example "Crashed", "User", "Shutdown").
	Reason string `json:"reason,omitempty"`
	// Result is set once the guest is gone for good.
	Result     *Result     `json:"result,omitempty"`
	Interfaces []Interface `json:"interfaces,omitempty"`
	// GuestOSInfo and Hostname come from the guest agent while one is connected.
	GuestOSInfo *kubevirtv1.VirtualMachineInstanceGuestOSInfo `json:"guestOSInfo,omitempty"`
	Hostname    string                                        `json:"hostname,omitempty"`
	// GuestInterfaces are the guest's NICs as its agent reports them.
	GuestInterfaces []GuestInterface `json:"guestInterfaces,omitempty"`
	// Frozen reports filesystems frozen through the guest agent.
	Frozen bool `json:"frozen,omitempty"`
	// GuestAgentConnected reports a responsive guest agent channel.
	GuestAgentConnected bool `json:"guestAgentConnected,omitempty"`
	// Migration is the state of an outgoing or incoming migration, if any.
	Migration *MigrationStatus `json:"migration,omitempty"`
	// HotplugVolumes are the hotplugged disks the domain has (hotplug.go), by volume name.
	HotplugVolumes []HotplugVolume `json:"hotplugVolumes,omitempty"`
	// HotplugFailures are the hotplugged volumes whose disk the launcher failed to attach.
	HotplugFailures []HotplugFailure `json:"hotplugFailures,omitempty"`
	// Versions are the QEMU and libvirt the domain runs with.
	Versions *Versions `json:"versions,omitempty"`
}

// MigrationStatus reports a live migration from the launcher's point of view.
type MigrationStatus struct {
	// Role is "source" or "target" (MigrationRoleSource, MigrationRoleTarget).
	Role string `json:"role"`
	// Completed: the guest runs on the target now. The source's domain is gone; the target
	// runs it.
	Completed bool   `json:"completed,omitempty"`
	Failed    bool   `json:"failed,omitempty"`
	Message   string `json:"message,omitempty"`
	// UID is the migration's (the VirtualMachineInstanceMigration's UID).
	UID string `json:"uid,omitempty"`
	// TargetReady: a target has its disks and network prepared and its libvirtd open on Ports;
	// the source may start.
	TargetReady bool            `json:"targetReady,omitempty"`
	Ports       *MigrationPorts `json:"ports,omitempty"`
	// Aborted: the source cancelled the migration on request (Failed is set too).
	Aborted bool `json:"aborted,omitempty"`
	// StartTime and EndTime bound the source's migration job.
	StartTime *metav1.Time `json:"startTime,omitempty"`
	EndTime   *metav1.Time `json:"endTime,omitempty"`
	// Progress of the source's migration job while it runs.
	Progress *MigrationProgress `json:"progress,omitempty"`
}
