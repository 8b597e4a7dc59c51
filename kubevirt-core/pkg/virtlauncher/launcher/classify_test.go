package launcher

import (
	"testing"

	"libvirt.org/go/libvirt"
)

// TestClassify pins the mapping from libvirt's STOPPED detail to exit codes that RerunOnFailure
// relies on; the root-only integration test covers the common cases for real.
func TestClassify(t *testing.T) {
	tests := []struct {
		name                          string
		detail                        libvirt.DomainEventStoppedDetailType
		stopping, destroyed, hostShut bool
		wantReason                    Reason
		wantExit                      int
	}{
		{"guest poweroff", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, false, false, false, ReasonShutdown, ExitStopped},
		{"ACPI stop on request", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, true, false, false, ReasonShutdown, ExitStopped},
		{"QEMU got SIGTERM from outside", libvirt.DOMAIN_EVENT_STOPPED_SHUTDOWN, false, false, true, ReasonCrashed, ExitCrashed},
		{"destroyed after grace", libvirt.DOMAIN_EVENT_STOPPED_DESTROYED, true, true, false, ReasonDestroyed, ExitStopped},
		{"destroyed by someone else", libvirt.DOMAIN_EVENT_STOPPED_DESTROYED, false, false, false, ReasonCrashed, ExitCrashed},
		{"guest crashed", libvirt.DOMAIN_EVENT_STOPPED_CRASHED, false, false, false, ReasonCrashed, ExitCrashed},
		{"QEMU killed", libvirt.DOMAIN_EVENT_STOPPED_FAILED, false, false, false, ReasonCrashed, ExitCrashed},
		{"QEMU killed while stopping", libvirt.DOMAIN_EVENT_STOPPED_FAILED, true, false, false, ReasonCrashed, ExitCrashed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.detail, tt.stopping, tt.destroyed, tt.hostShut)
			if got.Reason != tt.wantReason || got.ExitCode != tt.wantExit {
				t.Fatalf("got %+v, want reason %s exit %d", got, tt.wantReason, tt.wantExit)
			}
		})
	}
}

func TestImagePath(t *testing.T) {
	got := ImagePath("/store", "registry.local:5000/d8v/tiny:latest")
	if want := "/store/registry.local:5000%2Fd8v%2Ftiny:latest/disk.qcow2"; got != want {
		t.Fatalf("ImagePath = %q, want %q", got, want)
	}
}
