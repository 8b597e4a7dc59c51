package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
)

// testHotplug plugs a filesystem PVC into a running guest with addvolume, writes to the new
// disk, and unplugs it with removevolume: the disk comes and goes in the guest, the data stays on
// the claim, the VM's template follows, and the attachment Pod comes and goes; on the SCSI bus,
// a block-mode claim, and a bus that cannot hotplug too.
func testHotplug(t *testing.T, c *cluster, kc client.Client, ns string) {
	size := resource.MustParse("64Mi")
	claim, dir := hostPathClaim(t, kc, ns, "hotplug-data", size)
	vm := newVM(ns, "hotplug")
	vm.Spec.Template.Spec.Domain.Devices.Disks[0].Serial = "e2e-root"
	createVM(t, kc, vm)
	vmi := waitRunning(t, kc, ns, vm.Name, "")
	con := guestConsole(t, c, vm)
	if d, ok := guestDisks(t, con)["e2e-hot"]; ok {
		t.Fatalf("the guest has the disk before it is plugged: %+v", d)
	}

	t.Log("addvolume")
	volumeCommand(t, c, ns, "virtualmachines", vm.Name, "addvolume", fmt.Sprintf(
		`{"name":"hot","disk":{"serial":"e2e-hot","disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":%q}}}`, claim))
	eventually(t, time.Minute, "the VM template has the hotplugged volume and no pending request", func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachine{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return err
		}
		if n := len(cur.Status.VolumeRequests); n > 0 {
			return fmt.Errorf("%d volume requests pending", n)
		}
		v := findVolume(cur.Spec.Template.Spec.Volumes, "hot")
		if v == nil || v.PersistentVolumeClaim == nil || !v.PersistentVolumeClaim.Hotpluggable || v.PersistentVolumeClaim.ClaimName != claim {
			return fmt.Errorf("volume hot: %+v", v)
		}
		return nil
	})
	var attachPod string
	eventually(t, 3*time.Minute, "volume hot Ready in the VMI", func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
			return err
		}
		if v := findVolume(cur.Spec.Volumes, "hot"); v == nil {
			return fmt.Errorf("not in the VMI spec")
		}
		for _, s := range cur.Status.VolumeStatus {
			if s.Name != "hot" {
				continue
			}
			if s.Phase != kubevirtv1.VolumeReady || s.HotplugVolume == nil || s.Target == "" {
				return fmt.Errorf("status %+v", s)
			}
			attachPod = s.HotplugVolume.AttachPodName
			return nil
		}
		return fmt.Errorf("no volume status")
	})
	pod := &corev1.Pod{}
	if err := kc.Get(testenv.Context(t), client.ObjectKey{Namespace: ns, Name: attachPod}, pod); err != nil {
		t.Fatalf("attachment pod: %v", err)
	}
	owner := metav1.GetControllerOf(pod)
	if !strings.HasPrefix(pod.Name, "hp-volume-") || owner == nil || owner.Kind != "Pod" || !strings.HasPrefix(owner.Name, "virt-launcher-hotplug-") ||
		pod.Spec.NodeName != vmi.Status.NodeName {
		t.Fatalf("attachment pod %s on %s owned by %+v; want hp-volume-*, the launcher's, on %s", pod.Name, pod.Spec.NodeName, owner, vmi.Status.NodeName)
	}

	var dev string
	eventually(t, time.Minute, "the guest sees the new disk", func(context.Context) error {
		d, ok := guestDisks(t, con)["e2e-hot"]
		if !ok {
			return fmt.Errorf("no disk with serial e2e-hot")
		}
		if d.bytes != size.Value() {
			return fmt.Errorf("disk %+v, want %d bytes", d, size.Value())
		}
		dev = d.dev
		return nil
	})
	guestRun(t, con, fmt.Sprintf("echo e2e-hotplug-data >/dev/%s; sync", dev))
	if got := readGuestDisk(t, con, dev, 0); got != "e2e-hotplug-data" {
		t.Fatalf("the guest reads %q back from its hotplugged disk", got)
	}
	img := filepath.Join(dir, "disk.img")
	eventually(t, 30*time.Second, "the data in the claim's disk.img", func(context.Context) error {
		b, err := os.ReadFile(img)
		if err != nil || !bytes.Contains(b, []byte("e2e-hotplug-data")) {
			return fmt.Errorf("not there (read error %v)", err)
		}
		return nil
	})

	testHotplugSCSI(t, c, kc, vmi, con)
	testHotplugBlock(t, c, kc, vmi, con)
	testHotplugFailure(t, c, kc, vmi)

	t.Log("removevolume")
	volumeCommand(t, c, ns, "virtualmachines", vm.Name, "removevolume", `{"name":"hot"}`)
	eventually(t, 2*time.Minute, "the disk gone from the guest", func(context.Context) error {
		if d, ok := guestDisks(t, con)["e2e-hot"]; ok {
			return fmt.Errorf("still there: %+v", d)
		}
		return nil
	})
	eventually(t, 2*time.Minute, "volume, status and attachment pod gone", func(ctx context.Context) error {
		cur := &kubevirtv1.VirtualMachine{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vm), cur); err != nil {
			return err
		}
		if findVolume(cur.Spec.Template.Spec.Volumes, "hot") != nil {
			return fmt.Errorf("still in the VM template")
		}
		curVMI := &kubevirtv1.VirtualMachineInstance{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), curVMI); err != nil {
			return err
		}
		if findVolume(curVMI.Spec.Volumes, "hot") != nil {
			return fmt.Errorf("still in the VMI spec")
		}
		for _, s := range curVMI.Status.VolumeStatus {
			if s.Name == "hot" {
				return fmt.Errorf("volume status %+v", s)
			}
		}
		err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: attachPod}, &corev1.Pod{})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("attachment pod %s still there", attachPod)
		}
		if mounted, err := hotplugMounted("hotplug-disks/hot"); err != nil || mounted {
			return fmt.Errorf("the volume is still mounted on the node (%v)", err)
		}
		return nil
	})
	// The guest still runs the same VMI.
	guestRun(t, con, "true")
}

// testHotplugSCSI plugs a claim in on the SCSI bus, the default of KubeVirt's client: the guest
// sees a SCSI disk of the claim's size, and it goes again with removevolume.
func testHotplugSCSI(t *testing.T, c *cluster, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance, con *guesttest.Console) {
	t.Log("addvolume on the SCSI bus")
	size := resource.MustParse("48Mi")
	claim, _ := hostPathClaim(t, kc, vmi.Namespace, "hotplug-scsi", size)
	volumeCommand(t, c, vmi.Namespace, "virtualmachines", vmi.Name, "addvolume", fmt.Sprintf(
		`{"name":"hot-scsi","disk":{"disk":{"bus":"scsi"}},"volumeSource":{"persistentVolumeClaim":{"claimName":%q}}}`, claim))
	eventually(t, 3*time.Minute, "volume hot-scsi Ready on an sd target", func(ctx context.Context) error {
		s, err := volumeStatus(ctx, kc, vmi, "hot-scsi")
		if err != nil {
			return err
		}
		if s.Phase != kubevirtv1.VolumeReady || !strings.HasPrefix(s.Target, "sd") {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	scsiDisks := func() string {
		return guestValue(t, con, "scsi", `echo "scsi=[$(for d in /sys/block/sd*; do [ -e $d ] && echo -n "${d##*/}:$(cat $d/size) "; done)]"`)
	}
	want := fmt.Sprintf(":%d ", size.Value()/512)
	eventually(t, time.Minute, "the guest sees a SCSI disk of the claim's size", func(context.Context) error {
		if got := scsiDisks(); !strings.Contains(got, want) {
			return fmt.Errorf("SCSI disks %q", got)
		}
		return nil
	})
	volumeCommand(t, c, vmi.Namespace, "virtualmachines", vmi.Name, "removevolume", `{"name":"hot-scsi"}`)
	eventually(t, 2*time.Minute, "the SCSI disk gone from the guest and the status", func(ctx context.Context) error {
		if got := scsiDisks(); strings.Contains(got, want) {
			return fmt.Errorf("SCSI disks %q", got)
		}
		if s, err := volumeStatus(ctx, kc, vmi, "hot-scsi"); err == nil {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
}

// testHotplugBlock plugs a block-mode claim in (a loop device on a local volume): the attachment
// Pod holds it as a device, virt-handler binds the device into the launcher, the guest sees a
// disk of the device's size and what it writes reaches the device; removevolume takes it away
// and nothing stays bound.
func testHotplugBlock(t *testing.T, c *cluster, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance, con *guesttest.Console) {
	t.Log("addvolume of a block claim")
	size := resource.MustParse("40Mi")
	claim, dev := loopClaim(t, c, kc, vmi.Namespace, "hotplug-block", size)
	volumeCommand(t, c, vmi.Namespace, "virtualmachines", vmi.Name, "addvolume", fmt.Sprintf(
		`{"name":"hot-blk","disk":{"serial":"e2e-hot-blk","disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":%q}}}`, claim))
	eventually(t, 3*time.Minute, "volume hot-blk Ready", func(ctx context.Context) error {
		s, err := volumeStatus(ctx, kc, vmi, "hot-blk")
		if err != nil {
			return err
		}
		if s.Phase != kubevirtv1.VolumeReady {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	var guestDev string
	eventually(t, time.Minute, "the guest sees the block disk", func(context.Context) error {
		d, ok := guestDisks(t, con)["e2e-hot-blk"]
		if !ok || d.bytes != size.Value() {
			return fmt.Errorf("disk %+v, want %d bytes", d, size.Value())
		}
		guestDev = d.dev
		return nil
	})
	guestRun(t, con, fmt.Sprintf("echo e2e-hotplug-block >/dev/%s; sync", guestDev))
	eventually(t, 30*time.Second, "the data on the device", func(context.Context) error {
		f, err := os.Open(dev)
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 512)
		if _, err := f.ReadAt(b, 0); err != nil || !bytes.Contains(b, []byte("e2e-hotplug-block")) {
			return fmt.Errorf("not there (read error %v)", err)
		}
		return nil
	})
	volumeCommand(t, c, vmi.Namespace, "virtualmachines", vmi.Name, "removevolume", `{"name":"hot-blk"}`)
	eventually(t, 2*time.Minute, "the block disk gone from the guest, the status and the launcher", func(ctx context.Context) error {
		if d, ok := guestDisks(t, con)["e2e-hot-blk"]; ok {
			return fmt.Errorf("still in the guest: %+v", d)
		}
		if s, err := volumeStatus(ctx, kc, vmi, "hot-blk"); err == nil {
			return fmt.Errorf("status %+v", s)
		}
		if mounted, err := hotplugMounted("hotplug-disks/hot-blk"); err != nil || mounted {
			return fmt.Errorf("the device is still bound on the node (%v)", err)
		}
		return nil
	})
}

// testHotplugFailure plugs a claim in on a bus libvirt cannot hotplug (SATA): the volume stays
// MountedToPod with KubeVirt's reason FailedHotplugSync and libvirt's error, virt-handler records
// a Warning, and removevolume takes the volume away again.
func testHotplugFailure(t *testing.T, c *cluster, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance) {
	t.Log("addvolume that cannot attach")
	claim, _ := hostPathClaim(t, kc, vmi.Namespace, "hotplug-sata", resource.MustParse("16Mi"))
	volumeCommand(t, c, vmi.Namespace, "virtualmachines", vmi.Name, "addvolume", fmt.Sprintf(
		`{"name":"hot-sata","disk":{"disk":{"bus":"sata"}},"volumeSource":{"persistentVolumeClaim":{"claimName":%q}}}`, claim))
	eventually(t, 3*time.Minute, "volume hot-sata reported failed", func(ctx context.Context) error {
		s, err := volumeStatus(ctx, kc, vmi, "hot-sata")
		if err != nil {
			return err
		}
		if s.Phase != kubevirtv1.HotplugVolumeMounted || s.Reason != "FailedHotplugSync" ||
			!strings.HasPrefix(s.Message, "Failed to attach hotplugged volume hot-sata to VM: ") {
			return fmt.Errorf("status %+v", s)
		}
		t.Logf("volume status: %s: %s", s.Reason, s.Message)
		return nil
	})
	expectVMIEvents(t, kc, vmi, "virt-handler", "FailedHotplugSync")
	volumeCommand(t, c, vmi.Namespace, "virtualmachines", vmi.Name, "removevolume", `{"name":"hot-sata"}`)
	eventually(t, 2*time.Minute, "the failed volume gone from the status", func(ctx context.Context) error {
		if s, err := volumeStatus(ctx, kc, vmi, "hot-sata"); err == nil {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
}

// volumeStatus is the VMI's status of the named volume; an error when it has none.
func volumeStatus(ctx context.Context, kc client.Client, vmi *kubevirtv1.VirtualMachineInstance, name string) (*kubevirtv1.VolumeStatus, error) {
	cur := &kubevirtv1.VirtualMachineInstance{}
	if err := kc.Get(ctx, client.ObjectKeyFromObject(vmi), cur); err != nil {
		return nil, err
	}
	for i := range cur.Status.VolumeStatus {
		if cur.Status.VolumeStatus[i].Name == name {
			return &cur.Status.VolumeStatus[i], nil
		}
	}
	return nil, fmt.Errorf("no status of volume %s", name)
}

// volumeCommand calls addvolume or removevolume on a VM or VMI, as virtctl does.
func volumeCommand(t *testing.T, c *cluster, ns, resource, name, cmd, body string) {
	t.Helper()
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/%s/%s/%s", ns, resource, name, cmd)
	if out, err := testenv.KubectlInput(t, c.kubevirt, body, "replace", "--raw", path, "-f", "-"); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
}

func findVolume(vols []kubevirtv1.Volume, name string) *kubevirtv1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

// hotplugMounted reports whether a mount point on the node ends with suffix.
func hotplugMounted(suffix string) (bool, error) {
	mounts, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		found := strings.HasSuffix(m.Mountpoint, suffix)
		return !found, found
	})
	return len(mounts) > 0, err
}
