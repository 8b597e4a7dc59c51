package launcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/hack/pkg/guest"
	"github.com/d8virt/hack/pkg/guest/guesttest"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

const guestImage = "registry.local/d8v/tiny-guest:latest"

// TestLauncher runs the tiny guest through Run against a private libvirtd, as the compute
// container would: a containerDisk (overlay over the shared image) plus cloud-init user data. It
// checks the console, a graceful ACPI stop on cancel, and that a killed QEMU is reported as a crash.
func TestLauncher(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	img, d := guesttest.Setup(ctx, t, "launcher-test")

	// The image store as the node agent will lay it out; a symlink keeps the built image shared.
	store := t.TempDir()
	base := launcher.ImagePath(store, guestImage)
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(img.Disk, base); err != nil {
		t.Fatal(err)
	}

	conn, err := libvirt.NewConnect(d.URI)
	if err != nil {
		t.Fatalf("connect %s: %v", d.URI, err)
	}
	defer conn.Close()

	t.Run("console and graceful stop", func(t *testing.T) {
		vmi := testVMI("hello")
		l := startLauncher(ctx, t, d.URI, store, vmi)
		con := l.console(ctx, t)

		if _, err := con.WaitFor(regexp.MustCompile(`(?m)^hello-from-launcher\r?$`), 150*time.Second); err != nil {
			t.Fatalf("user-data output: %v", err)
		}
		line, err := con.WaitFor(regexp.MustCompile(guest.ReadyMarker+` hostname=(\S+)`), 60*time.Second)
		if err != nil {
			t.Fatalf("ready marker: %v", err)
		}
		if line[1] != vmi.Name {
			t.Errorf("hostname from meta-data: got %q, want %q", line[1], vmi.Name)
		}
		// The serial line only opens with the shell; type again until the answer comes.
		answer := regexp.MustCompile(`(?m)^42\r?$`)
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
		qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))

		// What SIGTERM does to virt-launcher.
		l.cancel()
		res := l.wait(t, 90*time.Second)
		if res.Reason != launcher.ReasonShutdown || res.ExitCode != launcher.ExitStopped {
			t.Fatalf("result %+v, want a clean shutdown", res)
		}
		if _, err := con.WaitFor(regexp.MustCompile(guest.ShutdownMarker), time.Second); err != nil {
			t.Errorf("guest did not run its shutdown path (ACPI): %v", err)
		}
		l.checkTerminationLog(t, res)
		assertGone(t, conn, converter.DomainName(vmi), qemu)
	})

	t.Run("QEMU killed", func(t *testing.T) {
		vmi := testVMI("crash")
		l := startLauncher(ctx, t, d.URI, store, vmi)
		con := l.console(ctx, t)
		// Any output proves the guest runs; no need to wait for the whole boot.
		if _, err := con.WaitFor(regexp.MustCompile(`\S`), 60*time.Second); err != nil {
			t.Fatalf("no console output: %v", err)
		}
		qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
		if err := syscall.Kill(qemu, syscall.SIGKILL); err != nil {
			t.Fatalf("kill QEMU: %v", err)
		}
		res := l.wait(t, 30*time.Second)
		if res.Reason != launcher.ReasonCrashed || res.ExitCode == launcher.ExitStopped {
			t.Fatalf("result %+v, want a crash with a non-zero exit code", res)
		}
		l.checkTerminationLog(t, res)
		assertGone(t, conn, converter.DomainName(vmi), qemu)
	})

	t.Run("QEMU terminated", func(t *testing.T) { testTerminated(ctx, t, conn, d.URI, store) })
}

// A SIGTERM to QEMU makes it report a host-initiated shutdown, which libvirt turns into the same
// STOPPED/shutdown event as a guest poweroff; only the SHUTDOWN event's detail tells them apart.
func testTerminated(ctx context.Context, t *testing.T, conn *libvirt.Connect, uri, store string) {
	vmi := testVMI("terminated")
	l := startLauncher(ctx, t, uri, store, vmi)
	con := l.console(ctx, t)
	if _, err := con.WaitFor(regexp.MustCompile(`\S`), 60*time.Second); err != nil {
		t.Fatalf("no console output: %v", err)
	}
	qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
	if err := syscall.Kill(qemu, syscall.SIGTERM); err != nil {
		t.Fatalf("terminate QEMU: %v", err)
	}
	res := l.wait(t, 30*time.Second)
	if res.Reason != launcher.ReasonCrashed || res.ExitCode == launcher.ExitStopped {
		t.Fatalf("result %+v, want a crash with a non-zero exit code", res)
	}
	assertGone(t, conn, converter.DomainName(vmi), qemu)
}

func testVMI(name string) *kubevirtv1.VirtualMachineInstance {
	mem := resource.MustParse("128Mi")
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "launcher-test", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, os.Getpid()))},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				Memory: &kubevirtv1.Memory{Guest: &mem},
				Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{
					{Name: "containerdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
					{Name: "cloudinitdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
				}},
			},
			Volumes: []kubevirtv1.Volume{
				{Name: "containerdisk", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: guestImage}}},
				{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{
					UserData: "#cloud-config\nruncmd:\n- echo hello-from-launcher\n",
				}}},
			},
		},
	}
}

type runningLauncher struct {
	cancel   context.CancelFunc
	done     chan struct{}
	res      launcher.Result
	err      error
	stateDir string
	termLog  string
}

func startLauncher(ctx context.Context, t *testing.T, uri, store string, vmi *kubevirtv1.VirtualMachineInstance) *runningLauncher {
	t.Helper()
	dir := t.TempDir()
	runCtx, cancel := context.WithCancel(ctx)
	l := &runningLauncher{cancel: cancel, done: make(chan struct{}), stateDir: filepath.Join(dir, "state"), termLog: filepath.Join(dir, "termination-log")}
	go func() {
		defer close(l.done)
		l.res, l.err = launcher.Run(runCtx, launcher.Options{
			VMI:            vmi,
			LibvirtURI:     uri,
			StateDir:       l.stateDir,
			ImageStore:     store,
			GracePeriod:    60 * time.Second,
			TerminationLog: l.termLog,
			Emulation:      true,
			// The tiny guest's kernel has no AHCI driver; "pc" is what it boots on here.
			MachineType: "pc",
			UserNetwork: true,
			Logger:      slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-l.done:
		case <-time.After(90 * time.Second):
			t.Error("launcher did not return within 90s of cancel")
		}
		if t.Failed() {
			b, _ := os.ReadFile(launcher.SerialLog(l.stateDir))
			t.Logf("serial console log:\n%s", b)
		}
	})
	return l
}

func (l *runningLauncher) console(ctx context.Context, t *testing.T) *guesttest.Console {
	t.Helper()
	path := launcher.ConsoleSocket(l.stateDir)
	// The socket appears once QEMU runs: after the disk and ISO are prepared and the domain starts.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var dialer net.Dialer
		c, err := dialer.DialContext(ctx, "unix", path)
		if err == nil {
			con := guesttest.NewConsole(c)
			t.Cleanup(func() { con.Close() })
			return con
		}
		select {
		case <-l.done:
			t.Fatalf("launcher returned before the console came up: %+v, %v", l.res, l.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("console socket %s: %v", path, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *runningLauncher) wait(t *testing.T, timeout time.Duration) launcher.Result {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(timeout):
		t.Fatalf("launcher did not return within %s", timeout)
	}
	if l.err != nil {
		t.Fatalf("Run: %v", l.err)
	}
	return l.res
}

func (l *runningLauncher) checkTerminationLog(t *testing.T, want launcher.Result) {
	t.Helper()
	b, err := os.ReadFile(l.termLog)
	if err != nil {
		t.Fatalf("termination log: %v", err)
	}
	var got launcher.Result
	if err := json.Unmarshal(b, &got); err != nil || got != want {
		t.Errorf("termination log %s (%v), want %+v", b, err, want)
	}
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

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
