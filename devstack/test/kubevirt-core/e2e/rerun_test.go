package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// Exit codes of virt-launcher (pkg/virtlauncher/launcher), which the Pod reports.
const (
	launcherExitStopped = 0
	launcherExitCrashed = 2
)

// testRerunOnFailure checks that RerunOnFailure tells a crash from a poweroff by how the launcher
// saw the guest end: QEMU killed from outside fails the VMI and the VM starts a new one; a poweroff
// typed in the guest succeeds it and the VM stays stopped.
func testRerunOnFailure(t *testing.T, c *cluster, kc client.Client, ns string) {
	vm := newVM(ns, "rerun")
	rerun := kubevirtv1.RunStrategyRerunOnFailure
	vm.Spec.RunStrategy = &rerun
	h := recordHistory(t, c, vm.Namespace)
	createVM(t, kc, vm)
	crashed := waitRunning(t, kc, vm.Namespace, vm.Name, "")

	t.Log("QEMU killed from outside: a failure, so the VM starts a new VMI")
	if err := syscall.Kill(qemuPid(t, crashed), syscall.SIGKILL); err != nil {
		t.Fatalf("kill QEMU: %v", err)
	}
	vmi := waitRunning(t, kc, vm.Namespace, vm.Name, crashed.UID)
	if !qemuRunning(vmi) {
		t.Fatal("the new VMI is Running but no QEMU runs its domain")
	}
	failed := h.vmi(crashed.UID, func(v *kubevirtv1.VirtualMachineInstance) bool { return v.Status.Phase == kubevirtv1.Failed })
	switch {
	case failed == nil:
		t.Errorf("the VMI whose QEMU was killed never was Failed")
	case !strings.Contains(readyMessage(failed), "Crashed"):
		t.Errorf("failed VMI's Ready message %q, want the launcher's Crashed result", readyMessage(failed))
	}
	// The VM deletes the failed VMI at once, and its Pod with it: the Pod may be gone before its
	// end was reported, so only a reported end is checked.
	if exit := h.launcherExit(crashed.UID); exit != nil {
		if exit.ExitCode != launcherExitCrashed || !strings.Contains(exit.Message, `"Crashed"`) {
			t.Errorf("crashed launcher ended with %d %q, want %d and a Crashed termination message", exit.ExitCode, exit.Message, launcherExitCrashed)
		}
	} else {
		t.Log("the crashed launcher's Pod went before its end was reported")
	}

	t.Log("poweroff in the guest: a success, so the VM stays stopped")
	con := guestConsole(t, c, vm)
	if err := con.Write("poweroff\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := con.WaitFor(regexp.MustCompile(`D8V-GUEST-SHUTDOWN`), time.Minute); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	waitVMStatus(t, kc, vm, kubevirtv1.VirtualMachineStatusStopped, 2*time.Minute)
	eventually(t, time.Minute, "the powered-off guest's VMI Succeeded and its launcher exited 0", func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return err
		}
		if cur.UID != vmi.UID || cur.Status.Phase != kubevirtv1.Succeeded {
			return fmt.Errorf("VMI %s in phase %s", cur.UID, cur.Status.Phase)
		}
		if !strings.Contains(readyMessage(cur), "Shutdown") {
			return fmt.Errorf("Ready message %q, want the launcher's Shutdown result", readyMessage(cur))
		}
		exit := h.launcherExit(vmi.UID)
		if exit == nil {
			return fmt.Errorf("the launcher's end is not reported yet")
		}
		if exit.ExitCode != launcherExitStopped || !strings.Contains(exit.Message, `"Shutdown"`) {
			return fmt.Errorf("launcher ended with %d %q, want %d and a Shutdown termination message", exit.ExitCode, exit.Message, launcherExitStopped)
		}
		if qemuRunning(vmi) {
			return fmt.Errorf("QEMU still runs")
		}
		return nil
	})

	// A restart would come within the back-off; give it well over that.
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(t.Context(), client.ObjectKeyFromObject(vmi), cur); err != nil {
			t.Fatalf("the powered-off VMI: %v", err)
		}
		if cur.UID != vmi.UID || cur.Status.Phase != kubevirtv1.Succeeded {
			t.Fatalf("after the poweroff the VM runs VMI %s in phase %s", cur.UID, cur.Status.Phase)
		}
		if qemuRunning(vmi) {
			t.Fatal("QEMU runs again after the poweroff")
		}
	}
	waitVMStatus(t, kc, vm, kubevirtv1.VirtualMachineStatusStopped, time.Second)
}

// qemuPid finds the QEMU process of the VMI's domain, as an admin on the node would.
func qemuPid(t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) int {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", "guest="+converter.DomainName(vmi)+",").Output()
	if err != nil {
		t.Fatalf("no QEMU for %s: %v", vmi.Name, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 1 {
		t.Fatalf("QEMU processes for %s: %q, want one", vmi.Name, fields)
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
