package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// runAsLauncher makes the test binary act as virt-launcher, so the tests run the real command
// (flags, signals, exit codes) without building it first.
const runAsLauncher = "D8V_TEST_RUN_VIRT_LAUNCHER"

func TestMain(m *testing.M) {
	if os.Getenv(runAsLauncher) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

const (
	guestImage = "registry.local/d8v/tiny-guest:latest"
	guestMAC   = "02:d8:76:00:00:01"
)

var (
	readyLine = regexp.MustCompile(guest.ReadyMarker + ` hostname=(\S+)`)
	answer    = regexp.MustCompile(`(?m)^42\r?$`)
)

// TestLauncher runs virt-launcher as the Pod would, against the test's private libvirtd
// (--libvirt-uri), and drives it only through the command socket, as virt-handler will.
func TestLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	img, d := guesttest.Setup(ctx, t, "virt-launcher-test")
	store := imageStore(t, img)
	conn, err := libvirt.NewConnect(d.URI)
	if err != nil {
		t.Fatalf("connect %s: %v", d.URI, err)
	}
	defer conn.Close()

	t.Run("product mode", func(t *testing.T) { testProductMode(ctx, t, conn, d.URI, store) })

	t.Run("kill", func(t *testing.T) {
		vmi := testVMI("kill")
		l := startLauncher(ctx, t, vmi, store, launchOpts{args: []string{"--libvirt-uri", d.URI}})
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
		l.expectExit(t, launcher.ExitStopped, 5*time.Second)
		l.checkTerminationLog(t, final.Result)
		assertGone(t, conn, converter.DomainName(vmi), qemu)
	})

	t.Run("QEMU killed", func(t *testing.T) {
		vmi := testVMI("crash")
		l := startLauncher(ctx, t, vmi, store, launchOpts{args: []string{"--libvirt-uri", d.URI}})
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
		l.expectExit(t, launcher.ExitCrashed, 5*time.Second)
		l.checkTerminationLog(t, final.Result)
		assertGone(t, conn, converter.DomainName(vmi), qemu)
	})
}

// testProductMode shares one guest across the commands: it waits for the VMI, boots it on Sync,
// refuses freeze without an agent, pauses and resumes it, soft-reboots it, and shuts it down.
func testProductMode(ctx context.Context, t *testing.T, conn *libvirt.Connect, uri, store string) {
	vmi := testVMI("product")
	l := startLauncher(ctx, t, vmi, store, launchOpts{args: []string{"--libvirt-uri", uri}})
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
	if want := []launcherapi.Interface{{Name: "default", MAC: guestMAC}}; fmt.Sprint(st.Interfaces) != fmt.Sprint(want) {
		t.Errorf("interfaces %+v, want %+v", st.Interfaces, want)
	}
	w.until(t, "Running", func(st *launcherapi.DomainStatus) bool { return st.State == launcherapi.StateRunning })
	// A second Sync (virt-handler resyncs) changes nothing.
	if _, err := l.client.Sync(ctx, &launcherapi.SyncRequest{VMI: vmi}); err != nil {
		t.Fatalf("second Sync: %v", err)
	}

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
		l.expectExit(t, launcher.ExitStopped, 5*time.Second)
		l.checkTerminationLog(t, final.Result)
		assertGone(t, conn, name, qemu)
		if _, err := os.Stat(l.socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("command socket left behind: %v", err)
		}
	})
}

// TestOwnLibvirtd runs virt-launcher without --libvirt-uri in a mount namespace with private
// libvirt directories, as the node agent runs the compute container: it must start its own
// virtlogd and libvirtd there, refuse to start a second pair next to them, run the guest, stop
// it on SIGTERM, and leave no process behind.
// privateLibvirt is how a container of the node agent runs: a mount namespace with private
// libvirt directories (a writable copy of the host's /etc/libvirt). It returns the command
// prefix and environment that put a launcher there.
func privateLibvirt(t *testing.T) (wrap, env []string) {
	t.Helper()
	for _, bin := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found", bin)
		}
	}
	seed := t.TempDir()
	if _, err := os.Stat("/etc/libvirt"); err == nil {
		if out, err := exec.Command("cp", "-a", "/etc/libvirt/.", seed).CombinedOutput(); err != nil {
			t.Fatalf("seed /etc/libvirt: %v: %s", err, out)
		}
	}
	// Propagation "slave": the namespace's mounts stay in it; /tmp (state, sockets) is shared.
	const script = `set -e
for d in /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt; do
	mkdir -p "$d"
	mount -t tmpfs tmpfs "$d"
done
mkdir -p /etc/libvirt
mount --bind "$D8V_TEST_SEED" /etc/libvirt
exec "$@"
`
	return []string{"unshare", "--mount", "--propagation", "slave", "--", "/bin/sh", "-c", script, "sh"},
		[]string{"D8V_TEST_SEED=" + seed}
}

func TestOwnLibvirtd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount namespace, libvirtd and QEMU")
	}
	for _, bin := range []string{"unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found", bin)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store := imageStore(t, img)

	vmi := testVMI("own")
	wrap, env := privateLibvirt(t)
	l := startLauncher(ctx, t, vmi, store, launchOpts{wrap: wrap, env: env})
	w := l.watch(ctx, t)
	l.sync(ctx, t, vmi)
	w.until(t, "Running", func(st *launcherapi.DomainStatus) bool { return st.State == launcherapi.StateRunning })

	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", l.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Readlink("/proc/self/ns/mnt")
	if ns == self {
		t.Fatal("the launcher runs in the test's mount namespace")
	}
	procs := processesIn(ns)
	for _, want := range []string{"libvirtd", "virtlogd", "qemu-system-x86"} {
		if !containsPrefix(procs, want) {
			t.Errorf("no %s in the launcher's mount namespace; it has %v", want, procs)
		}
	}

	// A second launcher in the same container must not start another libvirtd over the first.
	other := t.TempDir()
	second := exec.CommandContext(ctx, "nsenter", "--mount=/proc/"+fmt.Sprint(l.cmd.Process.Pid)+"/ns/mnt", "--",
		os.Args[0], "--name", "x", "--namespace", "y", "--uid", "z",
		"--socket", filepath.Join(other, "sock"), "--state-dir", filepath.Join(other, "state"),
		"--termination-log", filepath.Join(other, "termination-log"))
	second.Env = append(os.Environ(), runAsLauncher+"=1")
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
	for i := 0; guesttest.ProcessExists(qemu); i++ {
		if i > 50 {
			t.Fatalf("QEMU (pid %d) still runs", qemu)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if left := processesIn(ns); len(left) > 0 {
		t.Errorf("processes left in the launcher's mount namespace: %v", left)
	}
}

// launcherProc is a virt-launcher the test started.
type launcherProc struct {
	cmd      *exec.Cmd
	client   *launcherapi.Client
	socket   string
	stateDir string
	termLog  string
	exited   chan struct{}
	waitErr  error
	output   *syncBuffer
}

// launchOpts vary how a test starts virt-launcher.
type launchOpts struct {
	// wrap is a command that sets something up and execs its arguments, the launcher's command.
	wrap []string
	env  []string
	// args are added to the launcher's flags.
	args []string
	// podNetwork leaves out --user-network: the launcher binds the pod network in its namespace,
	// which must then be one of the test's own.
	podNetwork bool
}

// startLauncher starts virt-launcher for vmi and waits until it answers on its socket.
func startLauncher(ctx context.Context, t *testing.T, vmi *kubevirtv1.VirtualMachineInstance, store string, opts launchOpts) *launcherProc {
	t.Helper()
	dir := t.TempDir()
	l := &launcherProc{
		socket:   filepath.Join(dir, launcherapi.SocketName),
		stateDir: filepath.Join(dir, "state"),
		termLog:  filepath.Join(dir, "termination-log"),
		exited:   make(chan struct{}),
		output:   &syncBuffer{},
	}
	args := append([]string{
		"--name", vmi.Name, "--namespace", vmi.Namespace, "--uid", string(vmi.UID),
		// The guest's grace period is this minus the 15 s the launcher keeps for itself.
		"--grace-period-seconds", "75",
		"--socket", l.socket,
		"--state-dir", l.stateDir,
		"--image-store", store,
		"--termination-log", l.termLog,
		"--emulation",
		// The tiny guest's kernel has no AHCI driver; "pc" is what it boots on here.
		"--machine-type", "pc",
		"-v",
	}, opts.args...)
	if !opts.podNetwork {
		// The launcher runs in the test's network namespace here, which it must not rewire.
		args = append(args, "--user-network")
	}
	argv := append(append(opts.wrap, os.Args[0]), args...)
	l.cmd = exec.Command(argv[0], argv[1:]...)
	l.cmd.Env = append(append(os.Environ(), runAsLauncher+"=1"), opts.env...)
	l.cmd.Stdout = l.output
	l.cmd.Stderr = l.output
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		l.waitErr = l.cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-l.exited:
		default:
			// The test failed half-way: stop the guest the hard way, as the kubelet would.
			_ = l.cmd.Process.Signal(syscall.SIGKILL)
			<-l.exited
		}
		if t.Failed() {
			t.Logf("virt-launcher output:\n%s", l.output.String())
			b, _ := os.ReadFile(launcher.SerialLog(l.stateDir))
			t.Logf("serial console log:\n%s", b)
		}
	})

	c, err := launcherapi.Dial(l.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l.client = c
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-l.exited:
			t.Fatalf("virt-launcher exited before serving (%v):\n%s", l.waitErr, l.output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("virt-launcher does not answer on %s: %v", l.socket, err)
		}
	}
	if fi, err := os.Stat(l.socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("command socket mode: %v, %v; want 0600", fi.Mode(), err)
	}
	return l
}

func (l *launcherProc) sync(ctx context.Context, t *testing.T, vmi *kubevirtv1.VirtualMachineInstance) *launcherapi.DomainStatus {
	t.Helper()
	st, err := l.client.Sync(ctx, &launcherapi.SyncRequest{VMI: vmi})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return st
}

func (l *launcherProc) console(ctx context.Context, t *testing.T) *guesttest.Console {
	t.Helper()
	con, err := guesttest.DialConsole(ctx, launcher.ConsoleSocket(l.stateDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { con.Close() })
	return con
}

func (l *launcherProc) expectExit(t *testing.T, code int, timeout time.Duration) {
	t.Helper()
	select {
	case <-l.exited:
	case <-time.After(timeout):
		t.Fatalf("virt-launcher still runs %s after the final status", timeout)
	}
	if got := l.cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("exit code %d, want %d", got, code)
	}
}

func (l *launcherProc) checkTerminationLog(t *testing.T, want *launcherapi.Result) {
	t.Helper()
	b, err := os.ReadFile(l.termLog)
	if err != nil {
		t.Fatalf("termination log: %v", err)
	}
	var got launcher.Result
	if err := json.Unmarshal(b, &got); err != nil || *got.API() != *want {
		t.Errorf("termination log %s (%v), want %+v", b, err, want)
	}
}

// statusWatch collects a Watch stream.
type statusWatch struct {
	ch   chan *launcherapi.DomainStatus
	done chan struct{}
	err  error
}

func (l *launcherProc) watch(ctx context.Context, t *testing.T) *statusWatch {
	t.Helper()
	stream, err := l.client.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &statusWatch{ch: make(chan *launcherapi.DomainStatus, 100), done: make(chan struct{})}
	go w.read(stream)
	return w
}

func (w *statusWatch) read(stream grpc.ServerStreamingClient[launcherapi.DomainStatus]) {
	defer close(w.done)
	for {
		st, err := stream.Recv()
		if err != nil {
			w.err = err
			return
		}
		w.ch <- st
	}
}

// until waits for a status that ok accepts.
func (w *statusWatch) until(t *testing.T, what string, ok func(*launcherapi.DomainStatus) bool) *launcherapi.DomainStatus {
	t.Helper()
	var seen []string
	timeout := time.After(60 * time.Second)
	for {
		select {
		case st := <-w.ch:
			seen = append(seen, fmt.Sprintf("%s/%s", st.State, st.Reason))
			if ok(st) {
				return st
			}
		case <-w.done:
			// Drain what arrived before the stream ended.
			select {
			case st := <-w.ch:
				seen = append(seen, fmt.Sprintf("%s/%s", st.State, st.Reason))
				if ok(st) {
					return st
				}
				continue
			default:
			}
			t.Fatalf("watch ended (%v) before %s; saw %v", w.err, what, seen)
		case <-timeout:
			t.Fatalf("no %s within 60s; saw %v", what, seen)
		}
	}
}

// final waits for the status with the Result and checks that the stream ends after it.
func (w *statusWatch) final(t *testing.T) *launcherapi.DomainStatus {
	t.Helper()
	st := w.until(t, "the final status", func(st *launcherapi.DomainStatus) bool { return st.Result != nil })
	select {
	case <-w.done:
		if !errors.Is(w.err, io.EOF) {
			t.Errorf("watch ended with %v after the final status, want EOF", w.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the watch stream did not end after the final status")
	}
	return st
}

func domainState(t *testing.T, conn *libvirt.Connect, name string) libvirt.DomainState {
	t.Helper()
	dom, err := conn.LookupDomainByName(name)
	if err != nil {
		t.Fatalf("look up domain %s: %v", name, err)
	}
	defer dom.Free()
	state, _, err := dom.GetState()
	if err != nil {
		t.Fatalf("domain state: %v", err)
	}
	return state
}

func testVMI(name string) *kubevirtv1.VirtualMachineInstance {
	mem := resource.MustParse("128Mi")
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "virt-launcher-test", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, os.Getpid()))},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				Memory: &kubevirtv1.Memory{Guest: &mem},
				Devices: kubevirtv1.Devices{
					Disks: []kubevirtv1.Disk{
						{Name: "containerdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
						{Name: "cloudinitdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
					},
					Interfaces: []kubevirtv1.Interface{{
						Name: "default", MacAddress: guestMAC,
						InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
					}},
				},
			},
			Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
			Volumes: []kubevirtv1.Volume{
				{Name: "containerdisk", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: guestImage}}},
				{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{
					UserData: "#cloud-config\nruncmd:\n- echo hello-from-launcher\n",
				}}},
			},
		},
	}
}

// imageStore lays the guest image out as the node agent's image store; a symlink keeps the built
// image shared.
func imageStore(t *testing.T, img guest.Image) string {
	t.Helper()
	store := t.TempDir()
	base := launcher.ImagePath(store, guestImage)
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(img.Disk, base); err != nil {
		t.Fatal(err)
	}
	return store
}

// assertGone checks that neither the domain nor its QEMU outlives the launcher.
func assertGone(t *testing.T, conn *libvirt.Connect, name string, qemu int) {
	t.Helper()
	if dom, err := conn.LookupDomainByName(name); err == nil {
		dom.Free()
		t.Errorf("domain %s still exists", name)
	} else if lerr := (libvirt.Error{}); !errors.As(err, &lerr) || lerr.Code != libvirt.ERR_NO_DOMAIN {
		t.Errorf("look up domain %s: %v", name, err)
	}
	for i := 0; guesttest.ProcessExists(qemu); i++ {
		if i > 50 {
			t.Fatalf("QEMU (pid %d) still runs", qemu)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesIn lists "<comm>(<pid>)" of the live processes whose mount namespace is ns.
func processesIn(ns string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || !guesttest.ProcessExists(pid) {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err != nil || l != ns {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		out = append(out, fmt.Sprintf("%s(%d)", strings.TrimSpace(string(comm)), pid))
	}
	return out
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer the launcher's output can be written to while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
