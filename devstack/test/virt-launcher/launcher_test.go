package virtlauncher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// lingerLimit is how soon a launcher whose final status was read exits: sooner than the 10 s it
// waits for a reader otherwise, with time to stop its libvirtd and virtlogd.
const lingerLimit = 8 * time.Second

var (
	readyLine = regexp.MustCompile(guest.ReadyMarker + ` hostname=(\S+)`)
	answer    = regexp.MustCompile(`(?m)^42\r?$`)
)

// TestLauncher runs virt-launcher as a Pod runs it, each time in a Pod's network namespace with
// its own libvirtd, and drives it only through the command socket, as virt-handler does.
func TestLauncher(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("product mode", func(t *testing.T) { testProductMode(ctx, t, img) })

	t.Run("kill", func(t *testing.T) {
		vmi := testVMI("kill")
		l := startLauncher(ctx, t, vmi, img, launchOpts{})
		w := l.watch(ctx, t)
		l.sync(ctx, t, vmi)
		w.until(t, "Running", func(st *launcherapi.DomainStatus) bool { return st.State == launcherapi.StateRunning })
		qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
		// Twice: the handler retries after a timeout, and the second call must not fail.
		for i := 0; i < 2; i++ {
			if err := l.client.Kill(ctx); err != nil {
				t.Fatalf("Kill #%d: %v", i+1, err)
			}
		}
		final := w.final(t)
		if final.Result.Reason != string(launcher.ReasonDestroyed) || final.Result.ExitCode != launcher.ExitStopped {
			t.Errorf("final status %+v, want Destroyed with exit 0", final.Result)
		}
		l.expectExit(t, launcher.ExitStopped, lingerLimit)
		l.checkTerminationLog(t, final.Result)
		l.assertLeftNothing(t, qemu)
	})

	t.Run("QEMU killed", func(t *testing.T) {
		vmi := testVMI("crash")
		l := startLauncher(ctx, t, vmi, img, launchOpts{})
		l.sync(ctx, t, vmi)
		con := l.console(ctx, t)
		if _, err := con.WaitFor(regexp.MustCompile(`\S`), 60*time.Second); err != nil {
			t.Fatalf("no console output: %v", err)
		}
		qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
		if err := syscall.Kill(qemu, syscall.SIGKILL); err != nil {
			t.Fatalf("kill QEMU: %v", err)
		}
		// This time the handler polls Status: reading the final status that way releases the
		// launcher too.
		var final *launcherapi.DomainStatus
		for deadline := time.Now().Add(30 * time.Second); final == nil; time.Sleep(200 * time.Millisecond) {
			st, err := l.client.Status(ctx)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if st.Result != nil {
				final = st
			} else if time.Now().After(deadline) {
				t.Fatalf("no final status 30s after QEMU was killed; last %+v", st)
			}
		}
		if final.Result.Reason != string(launcher.ReasonCrashed) || final.Result.ExitCode != launcher.ExitCrashed {
			t.Errorf("final status %+v, want Crashed with exit %d", final.Result, launcher.ExitCrashed)
		}
		l.expectExit(t, launcher.ExitCrashed, lingerLimit)
		l.checkTerminationLog(t, final.Result)
		l.assertLeftNothing(t, qemu)
	})
}

// testProductMode shares one guest across the commands: it waits for the VMI, boots it on Sync,
// refuses freeze without an agent, pauses and resumes it, soft-reboots it, and shuts it down.
func testProductMode(ctx context.Context, t *testing.T, img guest.Image) {
	vmi := testVMI("product")
	l := startLauncher(ctx, t, vmi, img, launchOpts{})
	name := converter.DomainName(vmi)

	// Until virt-handler's Sync, there is nothing but the socket.
	if st, err := l.client.Status(ctx); err != nil || st.Defined {
		t.Fatalf("Status before Sync = %+v, %v; want an undefined domain", st, err)
	}
	w := l.watch(ctx, t)
	w.until(t, "the initial status", func(st *launcherapi.DomainStatus) bool { return !st.Defined })
	other := vmi.DeepCopy()
	other.UID = "not-this-pods-vmi"
	if _, err := l.client.Sync(ctx, &launcherapi.SyncRequest{VMI: other}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Sync of another VMI = %v, want InvalidArgument", err)
	}
	if err := l.client.Pause(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Pause before Sync = %v, want FailedPrecondition", err)
	}

	st := l.sync(ctx, t, vmi)
	if !st.Defined || st.State != launcherapi.StateRunning {
		t.Errorf("Sync returned %+v, want a running domain", st)
	}
	// No address before the guest's lease.
	if want := []launcherapi.Interface{{Name: "default", MAC: guestMAC}}; fmt.Sprint(st.Interfaces) != fmt.Sprint(want) {
		t.Errorf("interfaces %+v, want %+v", st.Interfaces, want)
	}
	w.until(t, "Running", func(st *launcherapi.DomainStatus) bool { return st.State == launcherapi.StateRunning })
	// A second Sync (virt-handler resyncs) changes nothing.
	if _, err := l.client.Sync(ctx, &launcherapi.SyncRequest{VMI: vmi}); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	conn := l.libvirt(t)

	con := l.console(ctx, t)
	if _, err := con.WaitFor(regexp.MustCompile(`(?m)^hello-from-launcher\r?$`), 150*time.Second); err != nil {
		t.Fatalf("user-data output: %v", err)
	}
	line, err := con.WaitFor(readyLine, 60*time.Second)
	if err != nil {
		t.Fatalf("ready marker: %v", err)
	}
	if line[1] != vmi.Name {
		t.Errorf("hostname from meta-data: got %q, want %q", line[1], vmi.Name)
	}
	// The serial line only opens with the shell; type again until the answer comes.
	typed := false
	for i := 0; i < 10 && !typed; i++ {
		if err := con.Write("echo $((6*7))\n"); err != nil {
			t.Fatal(err)
		}
		_, err := con.WaitFor(answer, 5*time.Second)
		typed = err == nil
	}
	if !typed {
		t.Fatal("no answer from the shell on the serial console")
	}
	qemu := guesttest.QemuPidOf(t, name)

	t.Run("guest agent", func(t *testing.T) {
		// The guest's init starts qemu-ga once the boot is far enough; the poller then reads it.
		st := w.until(t, "guest agent connected", func(st *launcherapi.DomainStatus) bool {
			return st.GuestAgentConnected && st.GuestOSInfo != nil && len(st.GuestInterfaces) > 0
		})
		if st.GuestOSInfo.ID != "d8v-guest" || st.Hostname != vmi.Name || st.GuestInterfaces[0].InterfaceName != "eth0" {
			t.Errorf("agent's report in the status: os %+v, hostname %q, interfaces %+v", st.GuestOSInfo, st.Hostname, st.GuestInterfaces)
		}
		info, err := l.client.GuestInfo(ctx)
		if err != nil || info.OS.ID != "d8v-guest" || info.GAVersion == "" || info.Timezone == "" {
			t.Errorf("GuestInfo = %+v, %v", info, err)
		}
		// Unfreeze of what is not frozen succeeds; freeze and thaw go through the agent.
		if err := l.client.Unfreeze(ctx); err != nil {
			t.Errorf("Unfreeze: %v", err)
		}
		if err := l.client.Freeze(ctx); err != nil {
			t.Fatalf("Freeze: %v", err)
		}
		if info, err := l.client.GuestInfo(ctx); err != nil || info.FSFreezeStatus != "frozen" {
			t.Errorf("GuestInfo while frozen = %+v, %v", info, err)
		}
		if err := l.client.Unfreeze(ctx); err != nil {
			t.Errorf("Unfreeze: %v", err)
		}
	})

	t.Run("domain stats", func(t *testing.T) { checkDomainStats(ctx, t, l) })

	t.Run("pause and unpause", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if err := l.client.Pause(ctx); err != nil {
				t.Fatalf("Pause #%d: %v", i+1, err)
			}
		}
		w.until(t, "Paused", func(st *launcherapi.DomainStatus) bool {
			return st.State == launcherapi.StatePaused && st.Reason == "User"
		})
		if state := domainState(t, conn, name); state != libvirt.DOMAIN_PAUSED {
			t.Errorf("libvirt state %d, want paused", state)
		}
		// With the vCPUs stopped, nobody in the guest reads the console: the command waits.
		if err := con.Write("echo $((6*7))\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(answer, 3*time.Second); err == nil {
			t.Fatal("the paused guest answered on its console")
		}
		for i := 0; i < 2; i++ {
			if err := l.client.Unpause(ctx); err != nil {
				t.Fatalf("Unpause #%d: %v", i+1, err)
			}
		}
		w.until(t, "Running after unpause", func(st *launcherapi.DomainStatus) bool {
			return st.State == launcherapi.StateRunning && st.Reason == "Unpaused"
		})
		if _, err := con.WaitFor(answer, 10*time.Second); err != nil {
			t.Fatalf("the guest did not answer after Unpause: %v", err)
		}
	})

	t.Run("soft reboot", func(t *testing.T) {
		if err := l.client.SoftReboot(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(regexp.MustCompile(guest.ShutdownMarker), 30*time.Second); err != nil {
			t.Fatalf("the guest did not go down for the reboot: %v", err)
		}
		if _, err := con.WaitFor(readyLine, 150*time.Second); err != nil {
			t.Fatalf("no second boot: %v", err)
		}
		// libvirt reset the same QEMU instead of ending it.
		if now := guesttest.QemuPidOf(t, name); now != qemu {
			t.Errorf("QEMU pid %d after the reboot, want the same process %d", now, qemu)
		}
		// libvirt hides the fake reboot's power-off from its clients: the status never left
		// Running.
		if st, err := l.client.Status(ctx); err != nil || st.State != launcherapi.StateRunning || st.Result != nil {
			t.Errorf("Status after the reboot = %+v, %v; want Running", st, err)
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		for i := 0; i < 2; i++ {
			if err := l.client.Shutdown(ctx, &launcherapi.ShutdownRequest{GracePeriodSeconds: 60}); err != nil {
				t.Fatalf("Shutdown #%d: %v", i+1, err)
			}
		}
		final := w.final(t)
		if final.Result.Reason != string(launcher.ReasonShutdown) || final.Result.ExitCode != launcher.ExitStopped {
			t.Errorf("final status %+v, want Shutdown with exit 0", final.Result)
		}
		if final.State != launcherapi.StateShutoff || final.Reason != "Shutdown" {
			t.Errorf("final state %s/%s, want Shutoff/Shutdown", final.State, final.Reason)
		}
		if _, err := con.WaitFor(regexp.MustCompile(guest.ShutdownMarker), time.Second); err != nil {
			t.Errorf("guest did not run its shutdown path (ACPI): %v", err)
		}
		// The watcher got the final status, so the launcher leaves without lingering.
		l.expectExit(t, launcher.ExitStopped, lingerLimit)
		l.checkTerminationLog(t, final.Result)
		l.assertLeftNothing(t, qemu)
		if _, err := os.Stat(l.socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("command socket left behind: %v", err)
		}
	})
}

// TestOwnLibvirtd checks the launcher's own daemons in its container's mount namespace: they
// run there, a second launcher in the same container refuses to start another pair over them,
// and after a SIGTERM (the guest stops gracefully) no process is left behind.
func TestOwnLibvirtd(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}

	vmi := testVMI("own")
	l := startLauncher(ctx, t, vmi, img, launchOpts{})
	w := l.watch(ctx, t)
	l.sync(ctx, t, vmi)
	w.until(t, "Running", func(st *launcherapi.DomainStatus) bool { return st.State == launcherapi.StateRunning })

	self, _ := os.Readlink("/proc/self/ns/mnt")
	if l.mntNS == self {
		t.Fatal("the launcher runs in the test's mount namespace")
	}
	procs := processesIn(l.mntNS)
	for _, want := range []string{"libvirtd", "virtlogd", "qemu-system-x86"} {
		if !containsPrefix(procs, want) {
			t.Errorf("no %s in the launcher's mount namespace; it has %v", want, procs)
		}
	}

	// A second launcher in the same container must not start another libvirtd over the first.
	other := t.TempDir()
	second := exec.CommandContext(ctx, "nsenter", "--mount=/proc/"+fmt.Sprint(l.cmd.Process.Pid)+"/ns/mnt", "--",
		launcherBinary(t), "--name", "x", "--namespace", "y", "--uid", "z",
		"--socket", filepath.Join(other, "sock"), "--state-dir", filepath.Join(other, "state"),
		"--termination-log", filepath.Join(other, "termination-log"))
	out, err := second.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != launcher.ExitError || !strings.Contains(string(out), "already answers") {
		t.Errorf("second launcher: %v, output:\n%s\nwant exit %d refusing the running libvirtd", err, out, launcher.ExitError)
	}

	con := l.console(ctx, t)
	if _, err := con.WaitFor(readyLine, 150*time.Second); err != nil {
		t.Fatalf("ready marker: %v", err)
	}
	qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	final := w.final(t)
	if final.Result.Reason != string(launcher.ReasonShutdown) || final.Result.ExitCode != launcher.ExitStopped {
		t.Errorf("final status %+v, want Shutdown with exit 0", final.Result)
	}
	l.expectExit(t, launcher.ExitStopped, 30*time.Second)
	l.checkTerminationLog(t, final.Result)
	l.assertLeftNothing(t, qemu)
}
