// Package guest provides the tiny test guest (Debian cloud kernel plus a busybox initramfs, built
// by hack/guest/build.sh from installed packages) and the cloud-init NoCloud ISOs that configure it.
//
// The guest reads its NoCloud ISO (volume label cidata) on any virtio disk, virtio-scsi or IDE
// cdrom (the cloud kernel has no AHCI, so not on a SATA bus), sets the hostname from meta-data,
// runs user-data (a #! script, or the runcmd list of a #cloud-config), gets an address by DHCP on
// every NIC, and then prints ReadyMarker on the serial console, where a root shell waits. The ACPI
// power button powers it off.
package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Lines the guest prints on its serial console.
const (
	// ReadyMarker starts the line printed once boot and user-data are done; " hostname=<name>"
	// follows.
	ReadyMarker = "D8V-GUEST-READY"
	// ShutdownMarker is printed when the guest starts to power off.
	ShutdownMarker = "D8V-GUEST-SHUTDOWN"
)

// MinMemoryMiB is the least memory the Debian kernel boots the guest with.
const MinMemoryMiB = 80

// Image is a built guest. Every file is world-readable.
type Image struct {
	// Dir holds the files below: <cache>/guest/<kernel-version>.
	Dir string
	// KernelVersion is the Debian cloud kernel's version.
	KernelVersion string
	// Kernel and Initrd are for a direct kernel boot, with Cmdline as the kernel command line.
	Kernel, Initrd string
	// Cmdline sends the console to ttyS0 (and tty0), as the disk's boot loader does.
	Cmdline string
	// Disk is a bootable qcow2 disk (FAT with syslinux, kernel and initrd) for containerDisk and
	// PVC use. Use it as a read-only base of an overlay: the guest never writes to it.
	Disk string
}

// BuildImage builds the guest image unless the cached one is current, and returns it. The script
// is hack/guest/build.sh of this source tree, or D8V_GUEST_BUILD_SCRIPT.
func BuildImage(ctx context.Context) (Image, error) {
	script := os.Getenv("D8V_GUEST_BUILD_SCRIPT")
	if script == "" {
		// The script sits next to this package in the source tree: devstack/guest -> hack/guest.
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			return Image{}, errors.New("guest: cannot locate hack/guest/build.sh; set D8V_GUEST_BUILD_SCRIPT")
		}
		script = filepath.Join(filepath.Dir(file), "..", "..", "hack", "guest", "build.sh")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return Image{}, fmt.Errorf("guest: %s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	// The output directory is the last line the script prints.
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return Image{}, fmt.Errorf("guest: %s printed no output directory", script)
	}
	cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return Image{}, fmt.Errorf("guest: read kernel command line: %w", err)
	}
	img := Image{
		Dir:           dir,
		KernelVersion: filepath.Base(dir),
		Kernel:        filepath.Join(dir, "vmlinuz"),
		Initrd:        filepath.Join(dir, "initrd.img"),
		Cmdline:       strings.TrimSpace(string(cmdline)),
		Disk:          filepath.Join(dir, "disk.qcow2"),
	}
	for _, f := range []string{img.Kernel, img.Initrd, img.Disk} {
		if _, err := os.Stat(f); err != nil {
			return Image{}, fmt.Errorf("guest: built image is incomplete: %w", err)
		}
	}
	return img, nil
}

// NoCloudISO writes a cloud-init NoCloud ISO (volume label cidata, files meta-data and user-data)
// into dir and returns its path. metaData is typically "instance-id: x\nlocal-hostname: y\n";
// userData a "#cloud-config" document or a "#!/bin/sh" script. Uses xorriso, else genisoimage.
func NoCloudISO(dir, metaData, userData string) (string, error) {
	src, err := os.MkdirTemp(dir, ".cidata-")
	if err != nil {
		return "", fmt.Errorf("guest: nocloud staging dir: %w", err)
	}
	defer os.RemoveAll(src)
	files := map[string]string{"meta-data": metaData, "user-data": userData}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("guest: write %s: %w", name, err)
		}
	}
	iso := filepath.Join(dir, "cidata.iso")
	// Joliet and Rock Ridge keep the dash names intact; the guest's isofs reads either.
	args := []string{"-quiet", "-V", "cidata", "-J", "-r", "-o", iso, filepath.Join(src, "meta-data"), filepath.Join(src, "user-data")}
	var cmd *exec.Cmd
	switch {
	case lookPath("xorriso"):
		cmd = exec.Command("xorriso", append([]string{"-as", "mkisofs"}, args...)...)
	case lookPath("genisoimage"):
		cmd = exec.Command("genisoimage", args...)
	default:
		return "", errors.New("guest: neither xorriso nor genisoimage found (run hack/install-deps.sh)")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("guest: build NoCloud ISO: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// QEMU may run as another user than the test.
	if err := os.Chmod(iso, 0o644); err != nil {
		return "", fmt.Errorf("guest: chmod %s: %w", iso, err)
	}
	return iso, nil
}

func lookPath(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}
