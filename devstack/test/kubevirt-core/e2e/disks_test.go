package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
)

// testDisks gives a VM an emptyDisk and a disk on a filesystem PVC besides its containerDisk,
// writes to each, and boots it again: only the PVC keeps the data.
func testDisks(t *testing.T, c *cluster, kc client.Client, ns string) {
	claimSize := resource.MustParse("128Mi")
	scratchSize := resource.MustParse("64Mi")
	claim, dir := hostPathClaim(t, kc, ns, "disks-data", claimSize)

	vm := newVM(ns, "disks")
	spec := &vm.Spec.Template.Spec
	virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
	// Serials let the guest tell its disks apart whatever names the kernel gives them.
	spec.Domain.Devices.Disks[0].Serial = "e2e-root"
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks,
		kubevirtv1.Disk{Name: "scratch", Serial: "e2e-scratch", DiskDevice: virtio},
		kubevirtv1.Disk{Name: "data", Serial: "e2e-data", DiskDevice: virtio})
	spec.Volumes = append(spec.Volumes,
		kubevirtv1.Volume{Name: "scratch", VolumeSource: kubevirtv1.VolumeSource{
			EmptyDisk: &kubevirtv1.EmptyDiskSource{Capacity: scratchSize}}},
		kubevirtv1.Volume{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}})
	createVM(t, kc, vm)
	vmi := waitRunning(t, kc, ns, vm.Name, "")
	t.Log("running; the guest writes to each disk")

	con := guestConsole(t, c, vm)
	disks := guestDisks(t, con)
	for serial, want := range map[string]int64{"e2e-scratch": scratchSize.Value(), "e2e-data": claimSize.Value()} {
		if got := disks[serial]; got.bytes != want {
			t.Errorf("guest disk %s: %+v, want %d bytes", serial, got, want)
		}
	}
	if disks["e2e-root"].dev == "" {
		t.Fatalf("no containerDisk in the guest: %+v", disks)
	}
	// The launcher made the image on the empty PVC, sized from the claim.
	img := filepath.Join(dir, "disk.img")
	if fi, err := os.Stat(img); err != nil || fi.Size() != claimSize.Value() {
		t.Fatalf("disk.img on the PVC: %v, %v; want %d bytes", fi, err, claimSize.Value())
	}

	// The containerDisk is written far behind the files of its FAT file system, so a guest that
	// wrongly kept the data would still boot.
	rootSector := disks["e2e-root"].bytes/512 - 8
	guestRun(t, con, fmt.Sprintf("echo e2e-pvc-data >/dev/%s; echo e2e-scratch-data >/dev/%s; "+
		"echo e2e-root-data | dd of=/dev/%s bs=512 seek=%d conv=notrunc 2>/dev/null; sync",
		disks["e2e-data"].dev, disks["e2e-scratch"].dev, disks["e2e-root"].dev, rootSector))
	want := map[string]string{"e2e-data": "e2e-pvc-data", "e2e-scratch": "e2e-scratch-data", "e2e-root": "e2e-root-data"}
	sector := map[string]int64{"e2e-root": rootSector}
	for serial, w := range want {
		if got := readGuestDisk(t, con, disks[serial].dev, sector[serial]); got != w {
			t.Fatalf("guest reads %q from %s right after writing %q", got, serial, w)
		}
	}
	// The guest's sync put the data into the launcher's image files (qcow2 keeps written data as
	// is), so its absence later means the images were replaced, not that the writes were lost.
	for file, w := range map[string]string{"disk-root.qcow2": "e2e-root-data", "empty-scratch.qcow2": "e2e-scratch-data", img: "e2e-pvc-data"} {
		if !filepath.IsAbs(file) {
			file = launcherFile(t, c, vmi, file)
		}
		eventually(t, 30*time.Second, w+" in "+file, func(context.Context) error {
			b, err := os.ReadFile(file)
			if err != nil || !bytes.Contains(b, []byte(w)) {
				return fmt.Errorf("not there (read error %v)", err)
			}
			return nil
		})
	}

	t.Log("stop and start: the PVC keeps its data, the emptyDisk and the containerDisk start afresh")
	vmCommand(t, c, ns, vm.Name, "stop")
	waitVMStatus(t, kc, vm, kubevirtv1.VirtualMachineStatusStopped, 2*time.Minute)
	eventually(t, time.Minute, "QEMU gone", func(context.Context) error {
		if qemuRunning(vmi) {
			return fmt.Errorf("QEMU still runs")
		}
		return nil
	})
	t.Log("stopped")
	vmCommand(t, c, ns, vm.Name, "start")
	waitRunning(t, kc, ns, vm.Name, vmi.UID)
	t.Log("running again; the guest reads each disk")
	con = guestConsole(t, c, vm)
	disks = guestDisks(t, con)
	want = map[string]string{"e2e-data": "e2e-pvc-data", "e2e-scratch": "", "e2e-root": ""}
	for serial, w := range want {
		if got := readGuestDisk(t, con, disks[serial].dev, sector[serial]); got != w {
			t.Errorf("after the restart the guest reads %q from %s, want %q", got, serial, w)
		}
	}
}

// launcherFile is the file the launcher of the VMI made in its state directory, as the node
// holds it in the Pod's private emptyDir.
func launcherFile(t *testing.T, c *cluster, vmi *kubevirtv1.VirtualMachineInstance, name string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(c.stack.Config().StateDir, "nodes", "*", "pods", "*", "volumes",
		"kubernetes.io~empty-dir", "private", string(vmi.UID), name))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s of VMI %s on the node: %q, %v", name, vmi.UID, m, err)
	}
	return m[0]
}

type guestDisk struct {
	dev   string
	bytes int64
}

var diskLine = regexp.MustCompile(`disk (vd[a-z]+) (\S+) (\d+)`)

// guestDisks lists the guest's virtio disks by serial.
func guestDisks(t *testing.T, con *guesttest.Console) map[string]guestDisk {
	t.Helper()
	out := guestRun(t, con, `for d in /sys/block/vd*; do echo "disk ${d##*/} $(cat $d/serial) $(cat $d/size)"; done`)
	disks := map[string]guestDisk{}
	for _, m := range diskLine.FindAllStringSubmatch(out, -1) {
		sectors, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		disks[m[2]] = guestDisk{dev: m[1], bytes: sectors * 512}
	}
	return disks
}

// readGuestDisk returns the letters, digits and dashes of the 512-byte sector of the guest's disk.
func readGuestDisk(t *testing.T, con *guesttest.Console, dev string, sector int64) string {
	t.Helper()
	return guestValue(t, con, "sector", fmt.Sprintf(`echo "sector=[$(dd if=/dev/%s bs=512 skip=%d count=1 2>/dev/null | tr -cd 'a-z0-9-')]"`, dev, sector))
}

// hostPathClaim creates an empty hostPath PersistentVolume and a claim bound to it, as a
// statically provisioned volume is, and returns the claim's name and the volume's directory. Both
// are deleted at the end of the test.
func hostPathClaim(t *testing.T, kc client.Client, ns, name string, size resource.Quantity) (string, string) {
	t.Helper()
	dir := t.TempDir()
	hostDir := corev1.HostPathDirectory
	staticClaim(t, kc, ns, name, size, corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostDir},
	}, nil)
	return name, dir
}

// staticClaim creates a PersistentVolume of src in the given volume mode, pinned to nodes by
// affinity when set, and a claim of that name bound to it, and waits until it is bound. Both are
// deleted at the end of the test.
func staticClaim(t *testing.T, kc client.Client, ns, name string, size resource.Quantity, mode corev1.PersistentVolumeMode,
	src corev1.PersistentVolumeSource, affinity *corev1.VolumeNodeAffinity) {
	t.Helper()
	ctx := testenv.Context(t)
	class := "e2e-static"
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   rwo,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			VolumeMode:                    &mode,
			PersistentVolumeSource:        src,
			NodeAffinity:                  affinity,
			// Bound to this claim only, so that no other test's claim takes it.
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      rwo,
			StorageClassName: &class,
			VolumeMode:       &mode,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	for _, o := range []client.Object{pv, pvc} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		// The protection finalizers hold both until no Pod uses the claim.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, o := range []client.Object{pvc, pv} {
			if err := kc.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
			start := time.Now()
			for {
				err := kc.Get(ctx, client.ObjectKeyFromObject(o), o)
				if apierrors.IsNotFound(err) {
					t.Logf("%s deleted after %s", o.GetName(), time.Since(start).Round(time.Second))
					break
				}
				if ctx.Err() != nil {
					t.Errorf("%s not deleted: %v", o.GetName(), err)
					return
				}
				time.Sleep(250 * time.Millisecond)
			}
		}
	})
	eventually(t, time.Minute, "claim "+name+" bound", func(ctx context.Context) error {
		cur := &corev1.PersistentVolumeClaim{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(pvc), cur); err != nil {
			return err
		}
		if cur.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("phase %s", cur.Status.Phase)
		}
		return nil
	})
}
