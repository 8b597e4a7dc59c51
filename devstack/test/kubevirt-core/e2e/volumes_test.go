package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/proc"
	"github.com/d8virt/devstack/testenv"
)

// testVolumeTypes boots a VM configured by a config drive with a disk on a block-mode claim (a
// loop device on the node) and a hostDisk the launcher creates: the guest sees both at their
// sizes, reads what the host wrote on the claim's device, and its writes to the hostDisk land in
// the node's file. It also has disks on a configMap, a secret, a downwardAPI and a serviceAccount
// volume, whose files the guest reads from their ISOs, and on an ephemeral claim, whose image
// its writes never reach. Nothing of the device is left held or mounted once the VM is gone.
func testVolumeTypes(t *testing.T, c *cluster, kc client.Client, ns string) {
	blockSize := resource.MustParse("96Mi")
	hostDiskSize := resource.MustParse("48Mi")
	claim, dev := loopClaim(t, c, kc, ns, "voltypes-blk", blockSize)
	// Written before the guest boots, at the claim's first sector, through the node's device.
	if err := writeDevice(dev, []byte("e2e-host-wrote-this")); err != nil {
		t.Fatal(err)
	}
	// The launcher makes the image, and the Pod's hostPath volume its directory.
	hostImg := filepath.Join(t.TempDir(), "hostdisk", "disk.img")

	vm := newVM(ns, "voltypes")
	spec := &vm.Spec.Template.Spec
	virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
	configDisks := withConfigVolumes(t, kc, vm)
	// The same user data as every VM's, from a config drive: the guest takes its hostname from
	// meta_data.json, so the console's marker names the VM only if the drive was read.
	spec.Volumes[1].VolumeSource = kubevirtv1.VolumeSource{CloudInitConfigDrive: &kubevirtv1.CloudInitConfigDriveSource{UserData: userData}}
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks,
		kubevirtv1.Disk{Name: "blk", Serial: "e2e-blk", DiskDevice: virtio},
		kubevirtv1.Disk{Name: "host", Serial: "e2e-host", DiskDevice: virtio})
	spec.Volumes = append(spec.Volumes,
		kubevirtv1.Volume{Name: "blk", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		kubevirtv1.Volume{Name: "host", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{
			Path: hostImg, Type: kubevirtv1.HostDiskExistsOrCreate, Capacity: hostDiskSize}}})
	createVM(t, kc, vm)
	waitRunning(t, kc, ns, vm.Name, "")
	con := guestConsole(t, c, vm)
	t.Log("running, configured by its config drive")

	disks := guestDisks(t, con)
	for serial, want := range map[string]int64{"e2e-blk": blockSize.Value(), "e2e-host": hostDiskSize.Value()} {
		if got := disks[serial]; got.bytes != want {
			t.Errorf("guest disk %s: %+v, want %d bytes", serial, got, want)
		}
	}
	if fi, err := os.Stat(hostImg); err != nil || fi.Size() != hostDiskSize.Value() {
		t.Fatalf("hostDisk image: %v, %v; want %d bytes", fi, err, hostDiskSize.Value())
	}
	if got := readGuestDisk(t, con, disks["e2e-blk"].dev, 0); got != "e2e-host-wrote-this" {
		t.Errorf("the guest reads %q from the block claim, want what the node wrote", got)
	}
	if _, err := os.Lstat("/dev/blk"); err == nil {
		t.Error("the launcher's device path /dev/blk is in the node's /dev")
	}
	guestRun(t, con, fmt.Sprintf("echo e2e-guest-wrote-this >/dev/%s; sync", disks["e2e-host"].dev))
	eventually(t, 30*time.Second, "the guest's data in "+hostImg, func(context.Context) error {
		b, err := os.ReadFile(hostImg)
		if err != nil || !bytes.Contains(b, []byte("e2e-guest-wrote-this")) {
			return fmt.Errorf("not there (read error %v)", err)
		}
		return nil
	})

	checkConfigVolumes(t, con, disks, configDisks)

	deleteVM(t, kc, vm)
	if err := deviceInUse(dev); err != nil {
		t.Errorf("after the VM is gone: %v", err)
	}
}

// withConfigVolumes gives vm's template a disk on a configMap, a secret, a downwardAPI, a
// serviceAccount volume and an ephemeral claim, made in its namespace; it returns, by disk serial,
// the files (path on the ISO to content) each config disk holds, and for the ephemeral disk
// ("e2e-eph") the claim image's first sector and the image.
func withConfigVolumes(t *testing.T, kc client.Client, vm *kubevirtv1.VirtualMachine) map[string]map[string]string {
	t.Helper()
	ctx := testenv.Context(t)
	ns := vm.Namespace
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "voltypes-app"}, Data: map[string]string{"app.conf": "e2e-cm-data"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "voltypes-creds"}, StringData: map[string]string{"password": "e2e-secret-data"}}
	for _, o := range []client.Object{cm, sec} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kc.Delete(context.Background(), o) })
	}
	golden, dir := hostPathClaim(t, kc, ns, "voltypes-golden", resource.MustParse("8Mi"))
	img := make([]byte, 8<<20)
	copy(img, "e2e-golden-image")
	if err := os.WriteFile(filepath.Join(dir, "disk.img"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	vm.Spec.Template.ObjectMeta.Labels = map[string]string{"e2e-label": "e2e-dapi-data"}
	spec := &vm.Spec.Template.Spec
	for _, v := range []struct {
		name, serial string
		src          kubevirtv1.VolumeSource
	}{
		{"cm", "e2e-cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
		{"sec", "e2e-sec", kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: sec.Name}}},
		{"dapi", "e2e-dapi", kubevirtv1.VolumeSource{DownwardAPI: &kubevirtv1.DownwardAPIVolumeSource{Fields: []corev1.DownwardAPIVolumeFile{
			{Path: "label", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['e2e-label']"}}}}}},
		{"sa", "e2e-sa", kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "default"}}},
		{"eph", "e2e-eph", kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: golden}}}},
	} {
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.name, Serial: v.serial,
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: v.name, VolumeSource: v.src})
	}
	return map[string]map[string]string{
		"e2e-cm":   {"/app.conf": "e2e-cm-data"},
		"e2e-sec":  {"/password": "e2e-secret-data"},
		"e2e-dapi": {"/label": "e2e-dapi-data"},
		"e2e-sa":   {"/namespace": ns},
		"e2e-eph":  {"sector": "e2e-golden-image", "image": filepath.Join(dir, "disk.img")},
	}
}

// checkConfigVolumes mounts each config disk's ISO in the guest and reads its files, and reads
// the ephemeral disk and writes into it: the claim's image keeps what it had.
func checkConfigVolumes(t *testing.T, con *guesttest.Console, disks map[string]guestDisk, want map[string]map[string]string) {
	t.Helper()
	for serial, files := range want {
		dev := disks[serial].dev
		if dev == "" {
			t.Errorf("the guest has no disk %s", serial)
			continue
		}
		if serial == "e2e-eph" {
			continue
		}
		for name, content := range files {
			got := guestValue(t, con, "content", fmt.Sprintf(`mkdir -p /mnt && mount -t iso9660 -o ro /dev/%s /mnt && echo "content=[$(cat /mnt%s)]"; umount /mnt`, dev, name))
			if got != content {
				t.Errorf("disk %s (%s): %s holds %q, want %q", serial, dev, name, got, content)
			}
		}
	}
	eph := want["e2e-eph"]
	dev := disks["e2e-eph"].dev
	if got := readGuestDisk(t, con, dev, 0); got != eph["sector"] {
		t.Errorf("the ephemeral disk reads %q, want the claim's image", got)
	}
	guestRun(t, con, fmt.Sprintf("echo e2e-overlay-write | dd of=/dev/%s conv=notrunc 2>/dev/null; sync", dev))
	if got := readGuestDisk(t, con, dev, 0); !strings.HasPrefix(got, "e2e-overlay-write") {
		t.Errorf("the guest reads %q back from the ephemeral disk", got)
	}
	if b, err := os.ReadFile(eph["image"]); err != nil || !bytes.HasPrefix(b, []byte(eph["sector"]+"\x00")) {
		t.Errorf("the claim's image changed (%v)", err)
	}
}

// loopClaim creates a block-mode claim on a local PersistentVolume of this cluster's node: a
// loop device over a sparse file of size bytes. It returns the claim's name and the device; the
// device is detached at the end of the test, after the claim is gone.
func loopClaim(t *testing.T, c *cluster, kc client.Client, ns, name string, size resource.Quantity) (string, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "block.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size.Value()); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", file).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detach %s: %v: %s", dev, err, out)
		}
	})
	// A local volume must name its node; the scheduler then places the launcher there.
	affinity := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: c.nodes}},
	}}}}
	staticClaim(t, kc, ns, name, size, corev1.PersistentVolumeBlock,
		corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dev}}, affinity)
	return name, dev
}

// writeDevice writes data at the start of the block device and flushes it past the page cache.
func writeDevice(dev string, data []byte) error {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", dev, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", dev, err)
	}
	return f.Close()
}

// deviceInUse reports a process that holds the block device open, or a mount of it, in any mount
// namespace of the machine: the launcher's private /dev goes with its processes.
func deviceInUse(dev string) error {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return err
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		var fst unix.Stat_t
		if unix.Stat(fd, &fst) == nil && fst.Mode&unix.S_IFMT == unix.S_IFBLK && fst.Rdev == st.Rdev {
			return fmt.Errorf("%s is held open by %s", dev, fd)
		}
	}
	// A bind of the device node shows up with the node's name below /dev as its root.
	pids, _ := proc.List()
	for _, pid := range pids {
		f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			continue
		}
		mounts, err := mountinfo.GetMountsFromReader(f, nil)
		f.Close()
		if err != nil {
			continue
		}
		for _, m := range mounts {
			if m.Root == "/"+filepath.Base(dev) {
				return fmt.Errorf("%s is mounted in the mount namespace of pid %d on %s", dev, pid, m.Mountpoint)
			}
		}
	}
	return nil
}
