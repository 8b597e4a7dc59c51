package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// bootIDScript prints the kernel's boot ID, which is new on every boot of the guest.
const bootIDScript = `echo "boot=[$(cat /proc/sys/kernel/random/boot_id)]"`

// testRestart restarts a running VM through the subresource: a new VMI replaces the old one and
// the guest really boots again, losing what it held in memory.
func testRestart(t *testing.T, c *cluster, kc client.Client, ns string) {
	vm := newVM(ns, "restart")
	createVM(t, kc, vm)
	old := waitRunning(t, kc, vm.Namespace, vm.Name, "")

	con := guestConsole(t, c, vm)
	oldBoot := guestValue(t, con, "boot", `echo before-restart >/tmp/e2e-state; `+bootIDScript)
	if len(oldBoot) != 36 {
		t.Fatalf("boot ID %q", oldBoot)
	}

	requested := time.Now()
	vmCommand(t, c, vm.Namespace, vm.Name, "restart")
	vmi := waitRunning(t, kc, vm.Namespace, vm.Name, old.UID)
	if !qemuRunning(vmi) {
		t.Fatal("the new VMI is Running but no QEMU runs its domain")
	}

	con = guestConsole(t, c, vm)
	if boot := guestValue(t, con, "boot", bootIDScript); boot == oldBoot {
		t.Errorf("boot ID %s unchanged: the guest did not boot again", boot)
	}
	if state := guestValue(t, con, "state", `echo "state=[$(cat /tmp/e2e-state 2>&1 | tr -d '\r\n[]$')]"`); !strings.Contains(state, "No such file") {
		t.Errorf("/tmp/e2e-state after the restart: %q, want it gone", state)
	}
	// The guest's uptime started after the request: no guest time carried over.
	up, err := strconv.ParseFloat(guestValue(t, con, "uptime", `echo "uptime=[$(cut -d' ' -f1 /proc/uptime)]"`), 64)
	if err != nil {
		t.Fatal(err)
	}
	if since := time.Since(requested); time.Duration(up*float64(time.Second)) > since {
		t.Errorf("guest uptime %.1fs, but the restart was requested %s ago", up, since.Round(time.Second))
	}
}
