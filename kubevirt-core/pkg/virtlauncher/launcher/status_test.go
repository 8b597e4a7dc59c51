package launcher

import (
	"fmt"
	"reflect"
	"testing"

	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// TestClassify pins the mapping from libvirt's STOPPED detail to exit codes that RerunOnFailure
// relies on; the root-only integration tests cover the common cases for real.
func TestClassify(t *testing.T) {
	var (
		none     = stopIntent{}
		stopping = stopIntent{stopping: true}
		expired  = stopIntent{stopping: true, graceExpired: true}
		killed   = stopIntent{killed: true}
	)
	tests := []struct {
		name       string
		detail     libvirt.DomainEventStoppedDetailType
		intent     stopIntent
		hostShut   bool
		wantReason Reason
		wantExit   int
	}{
		{"guest poweroff", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, none, false, ReasonShutdown, ExitStopped},
		{"ACPI stop on request", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, stopping, false, ReasonShutdown, ExitStopped},
		{"QEMU got SIGTERM from outside", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, none, true, ReasonCrashed, ExitCrashed},
		{"destroyed after grace", libvirt.DOMAIN_EVENT_STOPPED_DESTROYED, expired, false, ReasonDestroyed, ExitStopped},
		{"destroyed while stopping a paused guest", libvirt.DOMAIN_EVENT_STOPPED_DESTROYED, stopping, false, ReasonDestroyed, ExitStopped},
		{"killed on request", libvirt.DOMAIN_EVENT_STOPPED_DESTROYED, killed, false, ReasonDestroyed, ExitStopped},
		{"killed while QEMU reported a host shutdown", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, killed, true, ReasonDestroyed, ExitStopped},
		{"destroyed by someone else", libvirt.DOMAIN_EVENT_STOPPED_DESTROYED, none, false, ReasonCrashed, ExitCrashed},
		{"guest crashed", libvirt.DOMAIN_EVENT_STOPPED_CRASHED, none, false, ReasonCrashed, ExitCrashed},
		{"guest crashed while being killed", libvirt.DOMAIN_EVENT_STOPPED_CRASHED, killed, false, ReasonCrashed, ExitCrashed},
		{"QEMU killed", libvirt.DOMAIN_EVENT_STOPPED_FAILED, none, false, ReasonCrashed, ExitCrashed},
		{"QEMU killed while stopping", libvirt.DOMAIN_EVENT_STOPPED_FAILED, stopping, false, ReasonCrashed, ExitCrashed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.detail, tt.intent, tt.hostShut)
			if got.Reason != tt.wantReason || got.ExitCode != tt.wantExit {
				t.Fatalf("got %+v, want reason %s exit %d", got, tt.wantReason, tt.wantExit)
			}
		})
	}
}

func TestDomainState(t *testing.T) {
	tests := []struct {
		state      libvirt.DomainState
		reason     int
		wantState  launcherapi.DomainState
		wantReason string
	}{
		{libvirt.DOMAIN_RUNNING, int(libvirt.DOMAIN_RUNNING_BOOTED), launcherapi.StateRunning, "Booted"},
		{libvirt.DOMAIN_RUNNING, int(libvirt.DOMAIN_RUNNING_UNPAUSED), launcherapi.StateRunning, "Unpaused"},
		{libvirt.DOMAIN_RUNNING, 999, launcherapi.StateRunning, "Unknown"},
		{libvirt.DOMAIN_PAUSED, int(libvirt.DOMAIN_PAUSED_USER), launcherapi.StatePaused, "User"},
		{libvirt.DOMAIN_PAUSED, int(libvirt.DOMAIN_PAUSED_IOERROR), launcherapi.StatePaused, "IOError"},
		{libvirt.DOMAIN_PAUSED, int(libvirt.DOMAIN_PAUSED_STARTING_UP), launcherapi.StatePaused, "StartingUp"},
		{libvirt.DOMAIN_SHUTDOWN, int(libvirt.DOMAIN_SHUTDOWN_USER), launcherapi.StateShutdown, "User"},
		{libvirt.DOMAIN_SHUTDOWN, int(libvirt.DOMAIN_SHUTDOWN_UNKNOWN), launcherapi.StateShutdown, "Unknown"},
		{libvirt.DOMAIN_SHUTOFF, int(libvirt.DOMAIN_SHUTOFF_SHUTDOWN), launcherapi.StateShutoff, "Shutdown"},
		{libvirt.DOMAIN_SHUTOFF, int(libvirt.DOMAIN_SHUTOFF_DESTROYED), launcherapi.StateShutoff, "Destroyed"},
		{libvirt.DOMAIN_SHUTOFF, int(libvirt.DOMAIN_SHUTOFF_CRASHED), launcherapi.StateShutoff, "Crashed"},
		{libvirt.DOMAIN_SHUTOFF, int(libvirt.DOMAIN_SHUTOFF_FAILED), launcherapi.StateShutoff, "Failed"},
		{libvirt.DOMAIN_CRASHED, int(libvirt.DOMAIN_CRASHED_PANICKED), launcherapi.StateCrashed, "Panicked"},
		{libvirt.DOMAIN_BLOCKED, 0, launcherapi.StateBlocked, "Unknown"},
		{libvirt.DOMAIN_NOSTATE, 0, launcherapi.StateNoState, "Unknown"},
		{libvirt.DOMAIN_PMSUSPENDED, 0, launcherapi.StateNoState, "PMSuspended"},
	}
	for _, tt := range tests {
		state, reason := domainState(tt.state, tt.reason)
		if state != tt.wantState || reason != tt.wantReason {
			t.Errorf("domainState(%d, %d) = %s/%s, want %s/%s", tt.state, tt.reason, state, reason, tt.wantState, tt.wantReason)
		}
	}
}

// TestDomainDevices reads a domain XML as libvirt returns it for a running guest: generated MACs,
// libvirt's own aliases next to the converter's, and the agent channel's state.
func TestDomainDevices(t *testing.T) {
	const running = `<domain type='qemu' id='3'>
  <name>ns_vm</name>
  <devices>
    <interface type='user'>
      <mac address='52:54:00:12:34:56'/>
      <model type='virtio'/>
      <alias name='ua-default'/>
    </interface>
    <interface type='user'>
      <mac address='52:54:00:ab:cd:ef'/>
      <alias name='net1'/>
    </interface>
    <channel type='unix'>
      <source mode='bind' path='/var/lib/libvirt/qemu/channel/target/domain-3-ns_vm/org.qemu.guest_agent.0'/>
      <target type='virtio' name='org.qemu.guest_agent.0' state='%s'/>
      <alias name='channel0'/>
    </channel>
  </devices>
</domain>`
	tests := []struct {
		state     string
		wantAgent bool
	}{
		{"disconnected", false},
		{"connected", true},
	}
	for _, tt := range tests {
		ifaces, agent, err := domainDevices(fmt.Sprintf(running, tt.state))
		if err != nil {
			t.Fatal(err)
		}
		want := []launcherapi.Interface{{Name: "default", MAC: "52:54:00:12:34:56"}}
		if !reflect.DeepEqual(ifaces, want) || agent != tt.wantAgent {
			t.Errorf("agent %s: got %+v, agent %v; want %+v, agent %v", tt.state, ifaces, agent, want, tt.wantAgent)
		}
	}
	if _, _, err := domainDevices("<domain"); err == nil {
		t.Error("broken XML: no error")
	}
}
