package guest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
)

// TestBoot boots the guest for real through libvirt and QEMU (TCG), once by direct kernel boot with
// the NoCloud ISO on a virtio-scsi cdrom and once from the bootable disk (through a qcow2 overlay,
// as a containerDisk would) with the ISO as a virtio disk. Each time it checks the user-data output
// on the serial console, a command typed into the console, and a graceful ACPI poweroff.
func TestBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	img, d := guesttest.Setup(ctx, t, "guest-test")
	conn, err := libvirt.NewConnect(d.URI)
	if err != nil {
		t.Fatalf("connect %s: %v", d.URI, err)
	}
	defer conn.Close()

	t.Run("kernel", func(t *testing.T) {
		dir := t.TempDir()
		iso := nocloud(t, dir, "kernel-boot")
		dom := baseDomain(t, "kernel-boot", dir)
		dom.OS.Kernel = img.Kernel
		dom.OS.Initrd = img.Initrd
		dom.OS.Cmdline = img.Cmdline
		dom.Devices.Controllers = append(dom.Devices.Controllers, libvirtxml.DomainController{Type: "scsi", Model: "virtio-scsi"})
		dom.Devices.Disks = []libvirtxml.DomainDisk{{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: iso}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "scsi"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		}}
		bootAndCheck(ctx, t, conn, dom, "kernel-boot")
	})

	t.Run("disk", func(t *testing.T) {
		dir := t.TempDir()
		iso := nocloud(t, dir, "disk-boot")
		// The shared image stays pristine; the guest gets a copy-on-write overlay.
		overlay := filepath.Join(dir, "root.qcow2")
		if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img.Disk, overlay).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create overlay: %v: %s", err, out)
		}
		dom := baseDomain(t, "disk-boot", dir)
		dom.OS.BootDevices = []libvirtxml.DomainBootDevice{{Dev: "hd"}}
		dom.Devices.Disks = []libvirtxml.DomainDisk{
			{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: overlay}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			},
			{
				Device:   "disk",
				Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
				Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: iso}},
				Target:   &libvirtxml.DomainDiskTarget{Dev: "vdb", Bus: "virtio"},
				ReadOnly: &libvirtxml.DomainDiskReadOnly{},
			},
		}
		bootAndCheck(ctx, t, conn, dom, "disk-boot")
	})
}

// nocloud writes the NoCloud ISO of a guest named host whose user-data echoes a known line.
func nocloud(t *testing.T, dir, host string) string {
	t.Helper()
	iso, err := guest.NoCloudISO(dir,
		fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", host, host),
		"#cloud-config\nruncmd: [echo hello-from-user-data]\n")
	if err != nil {
		t.Fatal(err)
	}
	return iso
}

// baseDomain is a TCG domain (no /dev/kvm in CI) with ACPI (for the power button), the serial
// console on a unix socket in dir, and a user-mode NIC so the guest's DHCP client has a server.
func baseDomain(t *testing.T, name, dir string) *libvirtxml.Domain {
	t.Helper()
	port := uint(0)
	return &libvirtxml.Domain{
		Type:   "qemu",
		Name:   fmt.Sprintf("d8v-test-%s-%d", name, os.Getpid()),
		Memory: &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type: &libvirtxml.DomainOSType{Type: "hvm", Arch: "x86_64", Machine: "pc"},
		},
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Emulator: "/usr/bin/qemu-system-x86_64",
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{
					UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind", Path: filepath.Join(dir, "serial.sock")},
				},
				Target: &libvirtxml.DomainSerialTarget{Port: &port},
				// Everything the guest prints, also what came before the test connected, for the
				// failure message.
				Log: &libvirtxml.DomainChardevLog{File: filepath.Join(dir, "serial.log")},
			}},
			Interfaces: []libvirtxml.DomainInterface{{
				Source: &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}},
				Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			}},
			// The guest agent's port, as KubeVirt gives every guest.
			Channels: []libvirtxml.DomainChannel{{
				Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
				Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: "org.qemu.guest_agent.0"}},
			}},
		},
	}
}

func bootAndCheck(ctx context.Context, t *testing.T, conn *libvirt.Connect, spec *libvirtxml.Domain, host string) {
	xml, err := spec.Marshal()
	if err != nil {
		t.Fatalf("marshal domain: %v", err)
	}
	serialLog := spec.Devices.Serials[0].Log.File
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(serialLog)
			t.Logf("serial console log:\n%s", b)
		}
	}()

	start := time.Now()
	dom, err := conn.DomainCreateXML(xml, 0)
	if err != nil {
		t.Fatalf("create domain: %v", err)
	}
	defer dom.Free()
	// Whatever happens below, no guest outlives the test.
	defer func() {
		if active, err := dom.IsActive(); err == nil && active {
			dom.Destroy()
		}
	}()
	qemuPid := guesttest.QemuPidOf(t, spec.Name)

	con, err := guesttest.DialConsole(ctx, spec.Devices.Serials[0].Source.UNIX.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()

	// The Debian cloud kernel under TCG boots in 10-40 s here; leave room for a loaded machine.
	if _, err := con.WaitFor(regexp.MustCompile(`(?m)^hello-from-user-data\r?$`), 120*time.Second); err != nil {
		t.Fatalf("user-data output: %v", err)
	}
	line, err := con.WaitFor(regexp.MustCompile(guest.ReadyMarker+` hostname=(\S+)`), 60*time.Second)
	if err != nil {
		t.Fatalf("ready marker: %v", err)
	}
	t.Logf("%s: booted in %s", host, time.Since(start).Round(100*time.Millisecond))
	if got := line[1]; got != host {
		t.Errorf("hostname from meta-data: got %q, want %q", got, host)
	}

	// The shell starts right after the marker, and the serial port drops what arrives before it
	// opens the line: type again until the answer comes.
	answer := regexp.MustCompile(`(?m)^42\r?$`)
	var typed bool
	for i := 0; i < 10 && !typed; i++ {
		if err := con.Write("echo $((6*7))\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(answer, 5*time.Second); err == nil {
			typed = true
		}
	}
	if !typed {
		t.Fatal("no answer from the shell on the serial console")
	}

	// DHCP runs in the background during boot; QEMU's user-mode network hands out 10.0.2.15.
	leased := regexp.MustCompile(`inet 10\.0\.2\.15/24`)
	var hasLease bool
	for i := 0; i < 15 && !hasLease; i++ {
		if err := con.Write("ip -4 -o addr show dev eth0\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(leased, 2*time.Second); err == nil {
			hasLease = true
		}
	}
	if !hasLease {
		t.Error("eth0 got no DHCP address")
	}

	// The init starts qemu-ga on the agent's port; it names the OS from /etc/os-release.
	var osinfo string
	for i := 0; i < 30; i++ {
		if osinfo, err = dom.QemuAgentCommand(`{"execute":"guest-get-osinfo"}`, 5, 0); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Errorf("guest agent: %v", err)
	} else if !strings.Contains(osinfo, `"id": "d8v-guest"`) && !strings.Contains(osinfo, `"id":"d8v-guest"`) {
		t.Errorf("guest agent osinfo: %s", osinfo)
	}

	// Graceful stop, as KubeVirt does it: the ACPI power button, then the guest powers off itself.
	if err := dom.ShutdownFlags(libvirt.DOMAIN_SHUTDOWN_ACPI_POWER_BTN); err != nil {
		t.Fatalf("ACPI shutdown: %v", err)
	}
	stopStart := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		active, err := dom.IsActive()
		// A transient domain is gone once it stops; libvirt then says "no domain".
		if (err == nil && !active) || isNoDomain(err) {
			break
		}
		if err != nil {
			t.Fatalf("domain state: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("guest did not power off within 60s of the ACPI power button")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: powered off %s after the ACPI request", host, time.Since(stopStart).Round(100*time.Millisecond))
	if _, err := con.WaitFor(regexp.MustCompile(guest.ShutdownMarker), time.Second); err != nil {
		t.Errorf("guest did not run its shutdown path: %v", err)
	}

	// Nothing left behind: neither the domain nor its QEMU.
	if _, err := conn.LookupDomainByName(spec.Name); !isNoDomain(err) {
		t.Errorf("domain %s still defined after poweroff (err %v)", spec.Name, err)
	}
	for i := 0; guesttest.ProcessExists(qemuPid); i++ {
		if i > 50 {
			t.Fatalf("QEMU (pid %d) still runs after the guest powered off", qemuPid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isNoDomain(err error) bool {
	lerr, ok := err.(libvirt.Error)
	return ok && lerr.Code == libvirt.ERR_NO_DOMAIN
}
