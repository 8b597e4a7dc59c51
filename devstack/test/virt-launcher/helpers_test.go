package virtlauncher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/containerdisk"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/libvirtd"
)

const (
	guestImage = "registry.local/d8v/tiny-guest:latest"
	guestMAC   = "02:d8:76:00:00:01"
)

// needRoot skips a test that boots guests unless it runs as root with the tools the launcher's
// sandbox needs.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network and mount namespaces, libvirtd and QEMU")
	}
	for _, bin := range []string{"ip", "unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not found", bin)
		}
	}
}

// launcherProc is a virt-launcher the test started.
type launcherProc struct {
	cmd      *exec.Cmd
	client   *launcherapi.Client
	socket   string
	stateDir string
	termLog  string
	// mntNS is the launcher's mount namespace (its container's), as /proc/<pid>/ns/mnt reads.
	mntNS   string
	exited  chan struct{}
	waitErr error
	output  *testenv.SyncBuffer
}

// launchOpts vary how a test starts virt-launcher.
type launchOpts struct {
	// netns is the Pod's network namespace the launcher runs in; empty makes one.
	netns string
	// resolvConf, when set, is the Pod's /etc/resolv.conf.
	resolvConf string
	// mounts are the Pod's volumes: host directory to the container's path.
	mounts map[string]string
}

// podSandbox returns the command prefix and environment that run a program as a Pod's container
// runs: in netns (empty: this process's), and in a mount namespace of its own with private libvirt directories (a
// writable copy of this machine's /etc/libvirt), resolv as /etc/resolv.conf when set, and mounts
// (host directory to container path) bound in as a Pod's volumes are.
// Propagation "slave": the namespace's mounts stay in it, and /tmp (state, sockets) is shared.
func podSandbox(t *testing.T, netns, resolv string, mounts map[string]string) (wrap, env []string) {
	t.Helper()
	seed := t.TempDir()
	if _, err := os.Stat("/etc/libvirt"); err == nil {
		if out, err := exec.Command("cp", "-a", "/etc/libvirt/.", seed).CombinedOutput(); err != nil {
			t.Fatalf("seed /etc/libvirt: %v: %s", err, out)
		}
	}
	const script = `set -e
for d in /run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt; do
	mkdir -p "$d"
	mount -t tmpfs tmpfs "$d"
done
mkdir -p /etc/libvirt
mount --bind "$D8V_TEST_SEED" /etc/libvirt
if [ -n "$D8V_TEST_RESOLV" ]; then mount --bind "$D8V_TEST_RESOLV" /etc/resolv.conf; fi
for m in $D8V_TEST_MOUNTS; do
	mkdir -p "${m#*=}"
	mount --bind "${m%%=*}" "${m#*=}"
done
exec "$@"
`
	var binds []string
	for src, dst := range mounts {
		binds = append(binds, src+"="+dst)
	}
	wrap = []string{"unshare", "--mount", "--propagation", "slave", "--", "/bin/sh", "-c", script, "sh"}
	if netns != "" {
		wrap = append([]string{"ip", "netns", "exec", netns}, wrap...)
	}
	return wrap, []string{"D8V_TEST_SEED=" + seed, "D8V_TEST_RESOLV=" + resolv, "D8V_TEST_MOUNTS=" + strings.Join(binds, " ")}
}

// startLauncher starts virt-launcher for vmi in a Pod's sandbox and waits until it answers on
// its socket.
func startLauncher(ctx context.Context, t *testing.T, vmi *kubevirtv1.VirtualMachineInstance, img guest.Image, opts launchOpts) *launcherProc {
	t.Helper()
	bin := launcherBinary(t)
	if opts.netns == "" {
		pod, _, _ := podNamespace(t)
		opts.netns = pod.NetNS
	}
	dir := t.TempDir()
	l := &launcherProc{
		socket:   filepath.Join(dir, launcherapi.SocketName),
		stateDir: filepath.Join(dir, "state"),
		termLog:  filepath.Join(dir, "termination-log"),
		exited:   make(chan struct{}),
		output:   &testenv.SyncBuffer{},
	}
	wrap, env := podSandbox(t, opts.netns, opts.resolvConf, opts.mounts)
	argv := append(wrap, bin,
		"--name", vmi.Name, "--namespace", vmi.Namespace, "--uid", string(vmi.UID),
		// The guest's grace period is this minus the 15 s the launcher keeps for itself.
		"--grace-period-seconds", "75",
		"--socket", l.socket,
		"--state-dir", l.stateDir,
		"--container-disk-dir", imageStore(t, img),
		"--termination-log", l.termLog,
		"--emulation",
		"--log-level=debug",
	)
	l.cmd = exec.Command(argv[0], argv[1:]...)
	l.cmd.Env = append(os.Environ(), env...)
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
	// The wrappers exec each other, so the process started is the launcher by now.
	if l.mntNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", l.cmd.Process.Pid)); err != nil {
		t.Fatal(err)
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

// libvirt connects to the launcher's own libvirtd, through the launcher's view of its private
// /run/libvirt.
func (l *launcherProc) libvirt(t *testing.T) *libvirt.Connect {
	t.Helper()
	sock := fmt.Sprintf("/proc/%d/root%s/%s", l.cmd.Process.Pid, libvirtd.RunDir, libvirtd.LibvirtdSocket)
	conn, err := libvirt.NewConnect("qemu+unix:///system?socket=" + sock)
	if err != nil {
		t.Fatalf("connect to the launcher's libvirtd: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
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

// assertLeftNothing checks, once the launcher exited, that nothing of it outlives it: neither
// its QEMU nor any process in its mount namespace (its libvirtd and virtlogd, which took the
// domain with them).
func (l *launcherProc) assertLeftNothing(t *testing.T, qemu int) {
	t.Helper()
	waitGone(t, qemu)
	for i := 0; ; i++ {
		left := processesIn(l.mntNS)
		if len(left) == 0 {
			return
		}
		if i > 50 {
			t.Fatalf("processes left in the launcher's mount namespace: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
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

// testVMI is the tiny guest with a cloud-init NoCloud disk and a masquerade interface on the pod
// network.
func testVMI(name string) *kubevirtv1.VirtualMachineInstance {
	mem := resource.MustParse("128Mi")
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "virt-launcher-test", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, os.Getpid()))},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{
				// i440FX, as these tests have always booted the tiny guest: its kernel has no AHCI
				// driver for q35's SATA controller.
				Machine: &kubevirtv1.Machine{Type: "pc"},
				Memory:  &kubevirtv1.Memory{Guest: &mem},
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

// imageStore serves the guest image as the launcher Pod's containerDisk container would: on the
// volume's socket in the returned directory (the launcher's --container-disk-dir), until the test
// ends. One launcher's: a launcher removes the sockets when it ends, as its Pod's are its own.
func imageStore(t *testing.T, img guest.Image) string {
	t.Helper()
	dir := t.TempDir()
	disk, err := os.Open(img.Disk)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: containerdisk.Socket(dir, "containerdisk"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- containerdisk.Serve(ctx, l, disk) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("containerDisk server: %v", err)
		}
		disk.Close()
	})
	return dir
}

// assertGone checks that neither the domain nor its QEMU outlives the Manager that ran it on
// conn's libvirtd.
func assertGone(t *testing.T, conn *libvirt.Connect, name string, qemu int) {
	t.Helper()
	if dom, err := conn.LookupDomainByName(name); err == nil {
		dom.Free()
		t.Errorf("domain %s still exists", name)
	} else if lerr := (libvirt.Error{}); !errors.As(err, &lerr) || lerr.Code != libvirt.ERR_NO_DOMAIN {
		t.Errorf("look up domain %s: %v", name, err)
	}
	waitGone(t, qemu)
}

// waitGone waits a few seconds for the process to end.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; guesttest.ProcessExists(pid); i++ {
		if i > 50 {
			t.Fatalf("QEMU (pid %d) still runs", pid)
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
