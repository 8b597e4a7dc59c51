package virtlauncher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// TestManager drives the Manager directly against a private libvirtd with the tiny guest: what the
// commands do before the start, idempotent starts and pauses, the guest agent check, and a QEMU
// terminated from outside, which libvirt reports like a guest poweroff but is a crash. The
// binary's tests (TestLauncher) cover the protocol, the graceful stop, kill and soft reboot.
func TestManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, d := guesttest.Setup(ctx, t, "launcher-test")
	conn, err := libvirt.NewConnect(d.URI)
	if err != nil {
		t.Fatalf("connect %s: %v", d.URI, err)
	}
	defer conn.Close()

	newManager := func(t *testing.T) (*launcher.Manager, string) {
		state := t.TempDir()
		m, err := launcher.New(launcher.Config{
			LibvirtURI:       d.URI,
			StateDir:         state,
			ContainerDiskDir: imageStore(t, img),
			Emulation:        true,
			Logger:           slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			m.Close()
			if t.Failed() {
				b, _ := os.ReadFile(launcher.SerialLog(state))
				t.Logf("serial console log:\n%s", b)
			}
		})
		return m, state
	}

	t.Run("stop before start", func(t *testing.T) {
		m, _ := newManager(t)
		if err := m.Pause(); !errors.Is(err, launcher.ErrNotStarted) {
			t.Errorf("Pause before Start = %v, want ErrNotStarted", err)
		}
		if err := m.Shutdown(time.Minute); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.Done():
		default:
			t.Fatal("a stop before the start must end the launcher at once")
		}
		if res := m.Result(); res.Reason != launcher.ReasonDestroyed || res.ExitCode != launcher.ExitStopped {
			t.Errorf("result %+v, want a requested stop", res)
		}
		// The VMI arriving late must not start a guest in a Pod on its way out.
		if err := m.Start(ctx, managerVMI("late")); err != nil || m.Started() {
			t.Errorf("Start after the stop: %v, started %v; want a no-op", err, m.Started())
		}
		if st := m.Status(); st.Defined || st.Result == nil {
			t.Errorf("final status %+v, want an undefined domain with a result", st)
		}
	})

	t.Run("QEMU terminated", func(t *testing.T) {
		m, state := newManager(t)
		vmi := managerVMI("terminated")
		w := m.Watch()
		defer w.Close()
		if err := m.Start(ctx, vmi); err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx, vmi); err != nil {
			t.Errorf("second Start of the same VMI: %v", err)
		}
		// The guest's agent starts late in its boot (seconds under TCG), so right after Start
		// there is none yet.
		if err := m.Freeze(); !errors.Is(err, launcher.ErrNoGuestAgent) {
			t.Errorf("Freeze without a guest agent = %v, want ErrNoGuestAgent", err)
		}
		other := vmi.DeepCopy()
		other.UID = "another"
		var invalid *launcher.InvalidVMIError
		if err := m.Start(ctx, other); !errors.As(err, &invalid) {
			t.Errorf("Start of another VMI = %v, want an InvalidVMIError", err)
		}
		con, err := guesttest.DialConsole(ctx, launcher.ConsoleSocket(state))
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		// Any output proves the guest runs; no need to wait for the whole boot.
		if _, err := con.WaitFor(regexp.MustCompile(`\S`), 60*time.Second); err != nil {
			t.Fatalf("no console output: %v", err)
		}
		for i := 0; i < 2; i++ {
			if err := m.Pause(); err != nil {
				t.Fatalf("Pause #%d: %v", i+1, err)
			}
		}
		waitState(ctx, t, w, launcherapi.StatePaused)
		if err := m.SoftReboot(); !errors.Is(err, launcher.ErrPaused) {
			t.Errorf("SoftReboot of a paused guest = %v, want ErrPaused", err)
		}
		for i := 0; i < 2; i++ {
			if err := m.Unpause(); err != nil {
				t.Fatalf("Unpause #%d: %v", i+1, err)
			}
		}
		waitState(ctx, t, w, launcherapi.StateRunning)

		qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
		if err := syscall.Kill(qemu, syscall.SIGTERM); err != nil {
			t.Fatalf("terminate QEMU: %v", err)
		}
		select {
		case <-m.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the Manager did not notice QEMU's end")
		}
		if res := m.Result(); res.Reason != launcher.ReasonCrashed || res.ExitCode != launcher.ExitCrashed {
			t.Fatalf("result %+v, want a crash", res)
		}
		final := waitState(ctx, t, w, launcherapi.StateShutoff)
		if final.Result == nil || final.Result.Reason != string(launcher.ReasonCrashed) {
			t.Errorf("final status %+v, want the crash result", final)
		}
		if err := m.Pause(); !errors.Is(err, launcher.ErrFinished) {
			t.Errorf("Pause after the end = %v, want ErrFinished", err)
		}
		if err := m.Kill(); err != nil {
			t.Errorf("Kill after the end: %v, want success (already gone)", err)
		}
		assertGone(t, conn, converter.DomainName(vmi), qemu)
	})
}

// managerVMI is testVMI without the pod network: the Manager runs in the test's own network
// namespace here, which it must not rewire.
func managerVMI(name string) *kubevirtv1.VirtualMachineInstance {
	vmi := testVMI(name)
	vmi.Spec.Domain.Devices.Interfaces = nil
	vmi.Spec.Networks = nil
	return vmi
}

// waitState waits for a status in state and returns it.
func waitState(ctx context.Context, t *testing.T, w interface {
	Next(context.Context) (launcherapi.DomainStatus, error)
}, state launcherapi.DomainState) launcherapi.DomainStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seen []string
	for {
		st, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %s (saw %v): %v", state, seen, err)
		}
		seen = append(seen, fmt.Sprintf("%s/%s", st.State, st.Reason))
		if st.State == state {
			return st
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
