package launcher

import (
	"fmt"
	"strings"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// Reasons of each libvirt state, named as KubeVirt names them in its domain status, so that
// virt-handler can treat them as KubeVirt's handler does.
var (
	runningReasons = map[libvirt.DomainRunningReason]string{
		libvirt.DOMAIN_RUNNING_BOOTED:             "Booted",
		libvirt.DOMAIN_RUNNING_MIGRATED:           "Migrated",
		libvirt.DOMAIN_RUNNING_RESTORED:           "Restored",
		libvirt.DOMAIN_RUNNING_FROM_SNAPSHOT:      "FromSnapshot",
		libvirt.DOMAIN_RUNNING_UNPAUSED:           "Unpaused",
		libvirt.DOMAIN_RUNNING_MIGRATION_CANCELED: "MigrationCanceled",
		libvirt.DOMAIN_RUNNING_SAVE_CANCELED:      "SaveCanceled",
		libvirt.DOMAIN_RUNNING_WAKEUP:             "WakeUp",
		libvirt.DOMAIN_RUNNING_CRASHED:            "Crashed",
		libvirt.DOMAIN_RUNNING_POSTCOPY:           "PostCopy",
	}
	pausedReasons = map[libvirt.DomainPausedReason]string{
		libvirt.DOMAIN_PAUSED_USER:            "User",
		libvirt.DOMAIN_PAUSED_MIGRATION:       "Migration",
		libvirt.DOMAIN_PAUSED_SAVE:            "Save",
		libvirt.DOMAIN_PAUSED_DUMP:            "Dump",
		libvirt.DOMAIN_PAUSED_IOERROR:         "IOError",
		libvirt.DOMAIN_PAUSED_WATCHDOG:        "Watchdog",
		libvirt.DOMAIN_PAUSED_FROM_SNAPSHOT:   "FromSnapshot",
		libvirt.DOMAIN_PAUSED_SHUTTING_DOWN:   "ShuttingDown",
		libvirt.DOMAIN_PAUSED_SNAPSHOT:        "Snapshot",
		libvirt.DOMAIN_PAUSED_CRASHED:         "Crashed",
		libvirt.DOMAIN_PAUSED_STARTING_UP:     "StartingUp",
		libvirt.DOMAIN_PAUSED_POSTCOPY:        "Postcopy",
		libvirt.DOMAIN_PAUSED_POSTCOPY_FAILED: "PostcopyFailed",
	}
	shutoffReasons = map[libvirt.DomainShutoffReason]string{
		libvirt.DOMAIN_SHUTOFF_SHUTDOWN:      "Shutdown",
		libvirt.DOMAIN_SHUTOFF_DESTROYED:     "Destroyed",
		libvirt.DOMAIN_SHUTOFF_CRASHED:       "Crashed",
		libvirt.DOMAIN_SHUTOFF_MIGRATED:      "Migrated",
		libvirt.DOMAIN_SHUTOFF_SAVED:         "Saved",
		libvirt.DOMAIN_SHUTOFF_FAILED:        "Failed",
		libvirt.DOMAIN_SHUTOFF_FROM_SNAPSHOT: "FromSnapshot",
	}
	// The STOPPED event's detail says the same as the shutoff reason, in other numbers.
	stoppedReasons = map[libvirt.DomainEventStoppedDetailType]string{
		libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN:      "Shutdown",
		libvirt.DOMAIN_EVENT_STOPPED_DESTROYED:     "Destroyed",
		libvirt.DOMAIN_EVENT_STOPPED_CRASHED:       "Crashed",
		libvirt.DOMAIN_EVENT_STOPPED_MIGRATED:      "Migrated",
		libvirt.DOMAIN_EVENT_STOPPED_SAVED:         "Saved",
		libvirt.DOMAIN_EVENT_STOPPED_FAILED:        "Failed",
		libvirt.DOMAIN_EVENT_STOPPED_FROM_SNAPSHOT: "FromSnapshot",
	}
)

const reasonUnknown = "Unknown"

func lookup[K comparable](m map[K]string, k K) string {
	if r, ok := m[k]; ok {
		return r
	}
	return reasonUnknown
}

// domainState maps libvirt's state and reason (as virDomainGetState returns them) to the
// protocol's names.
func domainState(state libvirt.DomainState, reason int) (launcherapi.DomainState, string) {
	switch state {
	case libvirt.DOMAIN_RUNNING:
		return launcherapi.StateRunning, lookup(runningReasons, libvirt.DomainRunningReason(reason))
	case libvirt.DOMAIN_BLOCKED:
		return launcherapi.StateBlocked, reasonUnknown
	case libvirt.DOMAIN_PAUSED:
		return launcherapi.StatePaused, lookup(pausedReasons, libvirt.DomainPausedReason(reason))
	case libvirt.DOMAIN_SHUTDOWN:
		if libvirt.DomainShutdownReason(reason) == libvirt.DOMAIN_SHUTDOWN_USER {
			return launcherapi.StateShutdown, "User"
		}
		return launcherapi.StateShutdown, reasonUnknown
	case libvirt.DOMAIN_SHUTOFF:
		return launcherapi.StateShutoff, lookup(shutoffReasons, libvirt.DomainShutoffReason(reason))
	case libvirt.DOMAIN_CRASHED:
		if libvirt.DomainCrashedReason(reason) == libvirt.DOMAIN_CRASHED_PANICKED {
			return launcherapi.StateCrashed, "Panicked"
		}
		return launcherapi.StateCrashed, reasonUnknown
	case libvirt.DOMAIN_PMSUSPENDED:
		// The protocol has no suspended-to-RAM state; the reason keeps it recognisable.
		return launcherapi.StateNoState, "PMSuspended"
	default:
		return launcherapi.StateNoState, reasonUnknown
	}
}

// stopIntent is what the launcher had asked for when the domain stopped.
type stopIntent struct {
	// stopping: Shutdown pressed the ACPI power button.
	stopping bool
	// graceExpired: the guest ignored it for the grace period, so the launcher destroyed it.
	graceExpired bool
	// killed: Kill destroyed the domain.
	killed bool
}

// classify maps the STOPPED event detail to a Result. hostShutdown tells that QEMU's last SHUTDOWN
// event came from the host side (a signal to QEMU) rather than from the guest.
func classify(detail libvirt.DomainEventStoppedDetailType, intent stopIntent, hostShutdown bool) Result {
	if detail == libvirt.DOMAIN_EVENT_STOPPED_CRASHED {
		return Result{Reason: ReasonCrashed, Message: "the guest crashed", ExitCode: ExitCrashed}
	}
	if intent.killed {
		// Whatever QEMU reported on its way down, the stop was wanted.
		return Result{Reason: ReasonDestroyed, Message: "the domain was killed on request", ExitCode: ExitStopped}
	}
	switch detail {
	case libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN:
		if hostShutdown && !intent.stopping {
			return Result{Reason: ReasonCrashed, Message: "QEMU was terminated from outside", ExitCode: ExitCrashed}
		}
		return Result{Reason: ReasonShutdown, Message: "the guest powered off", ExitCode: ExitStopped}
	case libvirt.DOMAIN_EVENT_STOPPED_DESTROYED:
		switch {
		case intent.graceExpired:
			return Result{Reason: ReasonDestroyed, Message: "destroyed after the grace period", ExitCode: ExitStopped}
		case intent.stopping:
			return Result{Reason: ReasonDestroyed, Message: "destroyed while stopping", ExitCode: ExitStopped}
		}
		return Result{Reason: ReasonCrashed, Message: "the domain was destroyed by someone else", ExitCode: ExitCrashed}
	case libvirt.DOMAIN_EVENT_STOPPED_FAILED:
		return Result{Reason: ReasonCrashed, Message: "QEMU exited unexpectedly", ExitCode: ExitCrashed}
	default:
		return Result{Reason: ReasonCrashed, Message: fmt.Sprintf("the domain stopped unexpectedly (detail %d)", detail), ExitCode: ExitCrashed}
	}
}

// domainDevices reads what the status reports from the running domain's XML: the VMI's interfaces
// (the converter aliases each NIC ua-<interface name>; libvirt fills in MACs the VMI left open),
// and whether the guest agent's channel is connected.
func domainDevices(domXML string) (ifaces []launcherapi.Interface, agentConnected bool, err error) {
	var dom libvirtxml.Domain
	if err := dom.Unmarshal(domXML); err != nil {
		return nil, false, fmt.Errorf("parse domain XML: %w", err)
	}
	if dom.Devices == nil {
		return nil, false, nil
	}
	for _, nic := range dom.Devices.Interfaces {
		if nic.Alias == nil || !strings.HasPrefix(nic.Alias.Name, converter.AliasPrefix) {
			continue
		}
		iface := launcherapi.Interface{Name: strings.TrimPrefix(nic.Alias.Name, converter.AliasPrefix)}
		if nic.MAC != nil {
			iface.MAC = nic.MAC.Address
		}
		ifaces = append(ifaces, iface)
	}
	for _, ch := range dom.Devices.Channels {
		if t := ch.Target; t != nil && t.VirtIO != nil && t.VirtIO.Name == converter.GuestAgentChannel {
			agentConnected = t.VirtIO.State == "connected"
		}
	}
	return ifaces, agentConnected, nil
}
