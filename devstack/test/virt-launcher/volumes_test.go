package virtlauncher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// TestVolumeTypes boots the tiny guest with a disk on every kind of config volume and on an
// ephemeral claim, laid out as the launcher Pod's volumes are, then plugs disks in on the SCSI
// bus: the guest mounts each ISO and reads the files, reads the claim's image through its
// overlay without its writes reaching the claim, sees the hotplugged SCSI disk with its data,
// and a disk libvirt cannot plug (SATA on i440FX, which has no SATA controller) is reported as a
// failure in the status while the other one is attached.
func TestVolumeTypes(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The Pod's volumes: kubevirt-private with the config volumes' files and the ephemeral
	// claim's mount, the service account's token, and the hotplug emptyDir.
	private, token, hotDisks := t.TempDir(), t.TempDir(), t.TempDir()
	files := map[string]string{
		"config-map/cm/app.conf":            "cm-data-42",
		"secret/sec/password":               "sec-data-43",
		"downwardapi/dapi/labels":           "dapi-data-44",
		"sysprep/unattend/autounattend.xml": "sysprep-data-45",
		"vmi-disks/golden/disk.img":         "golden-image-data",
		"config-map/unused/never-read.conf": "not on any disk",
		"../token/token":                    "sa-token-46",
		"../token/namespace":                "virt-launcher-test",
		"../hotplug/hot/disk.img":           "hotplug-scsi-data",
		"../hotplug/bad/disk.img":           "never-attached",
	}
	for name, content := range files {
		p := filepath.Join(private, name)
		switch {
		case strings.HasPrefix(name, "../token/"):
			p = filepath.Join(token, strings.TrimPrefix(name, "../token/"))
		case strings.HasPrefix(name, "../hotplug/"):
			p = filepath.Join(hotDisks, strings.TrimPrefix(name, "../hotplug/"))
		}
		data := []byte(content)
		if strings.HasSuffix(name, "disk.img") {
			// A disk image of 4 MiB with the content in its first sector.
			data = append(data, make([]byte, 4<<20-len(data))...)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	vmi := testVMI("voltypes")
	virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
	spec := &vmi.Spec
	for _, d := range []struct {
		name, serial string
		src          kubevirtv1.VolumeSource
	}{
		{"cm", "cfg-cm", kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, VolumeLabel: "cfgdata"}}},
		{"sec", "cfg-sec", kubevirtv1.VolumeSource{Secret: &kubevirtv1.SecretVolumeSource{SecretName: "creds"}}},
		{"dapi", "cfg-dapi", kubevirtv1.VolumeSource{DownwardAPI: &kubevirtv1.DownwardAPIVolumeSource{}}},
		{"sa", "cfg-sa", kubevirtv1.VolumeSource{ServiceAccount: &kubevirtv1.ServiceAccountVolumeSource{ServiceAccountName: "reader"}}},
		{"golden", "eph-golden", kubevirtv1.VolumeSource{Ephemeral: &kubevirtv1.EphemeralVolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "golden"}}}},
	} {
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: d.name, Serial: d.serial, DiskDevice: virtio})
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: d.name, VolumeSource: d.src})
	}
	// Windows looks for its answer file on a CD-ROM; the i440FX guest reads one on virtio-scsi.
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "unattend",
		DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSCSI}}})
	spec.Volumes = append(spec.Volumes,
		kubevirtv1.Volume{Name: "unattend", VolumeSource: kubevirtv1.VolumeSource{Sysprep: &kubevirtv1.SysprepSource{
			ConfigMap: &corev1.LocalObjectReference{Name: "answers"}}}},
		// A config volume without a disk is not the guest's.
		kubevirtv1.Volume{Name: "unused", VolumeSource: kubevirtv1.VolumeSource{ConfigMap: &kubevirtv1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "other"}}}})

	l := startLauncher(ctx, t, vmi, img, launchOpts{mounts: map[string]string{
		private:  launcherapi.PrivateDir,
		token:    launcherapi.ServiceAccountSourceDir,
		hotDisks: hotplug.DisksDir,
	}})
	w := l.watch(ctx, t)
	l.sync(ctx, t, vmi)
	w.until(t, "Running", func(st *launcherapi.DomainStatus) bool { return st.State == launcherapi.StateRunning })
	con := l.console(ctx, t)
	if _, err := con.WaitFor(readyLine, 150*time.Second); err != nil {
		t.Fatalf("ready marker: %v", err)
	}
	shellReady(t, con)

	for serial, want := range map[string]string{
		"cfg-cm": "/app.conf=cm-data-42", "cfg-sec": "/password=sec-data-43", "cfg-dapi": "/labels=dapi-data-44",
		"cfg-sa": "/token=sa-token-46 /namespace=virt-launcher-test",
	} {
		dev := guestValue(t, con, "dev", fmt.Sprintf(`for d in /sys/block/vd*; do [ "$(cat $d/serial)" = %s ] && echo "dev=[${d##*/}]"; done`, serial))
		for _, f := range strings.Fields(want) {
			name, content, _ := strings.Cut(f, "=")
			if got := guestFile(t, con, dev, name); got != content {
				t.Errorf("%s (%s): %s holds %q, want %q", serial, dev, name, got, content)
			}
		}
	}
	if got := guestFile(t, con, "sr0", "/autounattend.xml"); got != "sysprep-data-45" {
		t.Errorf("sysprep CD-ROM: autounattend.xml holds %q", got)
	}
	if got := guestValue(t, con, "files", `mount -t iso9660 -o ro /dev/sr0 /mnt && echo "files=[$(ls /mnt | tr '\n' ' ')]"; umount /mnt`); got != "autounattend.xml " {
		t.Errorf("the sysprep CD-ROM holds %q, want only the answer file", got)
	}

	golden := guestValue(t, con, "dev", `for d in /sys/block/vd*; do [ "$(cat $d/serial)" = eph-golden ] && echo "dev=[${d##*/}]"; done`)
	if got := guestSector(t, con, golden); got != "golden-image-data" {
		t.Errorf("the ephemeral disk reads %q, want the claim's image", got)
	}
	guestValue(t, con, "wrote", fmt.Sprintf(`echo guest-overlay-write | dd of=/dev/%s conv=notrunc 2>/dev/null; sync; echo "wrote=[$?]"`, golden))
	if got := guestSector(t, con, golden); !strings.HasPrefix(got, "guest-overlay-write") {
		t.Errorf("the guest reads %q back from the ephemeral disk", got)
	}
	if b, _ := os.ReadFile(filepath.Join(private, "vmi-disks/golden/disk.img")); !bytes.HasPrefix(b, []byte("golden-image-data\x00")) {
		t.Errorf("the guest's write reached the claim's image: %q", b[:32])
	}

	t.Log("hotplug on SCSI, and one that cannot attach")
	hot := vmi.DeepCopy()
	for _, d := range []struct {
		name string
		bus  kubevirtv1.DiskBus
	}{{"hot", kubevirtv1.DiskBusSCSI}, {"bad", kubevirtv1.DiskBusSATA}} {
		hot.Spec.Domain.Devices.Disks = append(hot.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: d.name,
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: d.bus}}})
		hot.Spec.Volumes = append(hot.Spec.Volumes, kubevirtv1.Volume{Name: d.name, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true,
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.name}}}})
		hot.Status.VolumeStatus = append(hot.Status.VolumeStatus, kubevirtv1.VolumeStatus{Name: d.name, Phase: kubevirtv1.HotplugVolumeMounted,
			HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}})
	}
	l.sync(ctx, t, hot)
	st := w.until(t, "hot attached and bad failed", func(st *launcherapi.DomainStatus) bool {
		return len(st.HotplugVolumes) == 1 && len(st.HotplugFailures) == 1
	})
	if v := st.HotplugVolumes[0]; v.Name != "hot" || !strings.HasPrefix(v.Target, "sd") {
		t.Errorf("attached %+v, want hot on an sd target", v)
	}
	if f := st.HotplugFailures[0]; f.Name != "bad" || f.Message == "" {
		t.Errorf("failure %+v, want bad with libvirt's reason", f)
	}
	t.Logf("the failed hotplug: %s", st.HotplugFailures[0].Message)
	var dev string
	for deadline := time.Now().Add(time.Minute); dev == ""; time.Sleep(time.Second) {
		// sr0 is the sysprep CD-ROM; the SCSI disk is sd*.
		dev = guestValue(t, con, "dev", `echo "dev=[$(cd /sys/block && ls -d sd* 2>/dev/null | head -n1)]"`)
		if time.Now().After(deadline) {
			t.Fatal("the guest sees no SCSI disk")
		}
	}
	if got := guestSector(t, con, dev); got != "hotplug-scsi-data" {
		t.Errorf("the hotplugged SCSI disk %s reads %q", dev, got)
	}
	// Unplugging the failed volume clears its failure.
	hot.Spec.Domain.Devices.Disks = hot.Spec.Domain.Devices.Disks[:len(hot.Spec.Domain.Devices.Disks)-1]
	hot.Spec.Volumes = hot.Spec.Volumes[:len(hot.Spec.Volumes)-1]
	hot.Status.VolumeStatus = hot.Status.VolumeStatus[:1]
	l.sync(ctx, t, hot)
	w.until(t, "the failure gone", func(st *launcherapi.DomainStatus) bool {
		return len(st.HotplugFailures) == 0 && len(st.HotplugVolumes) == 1
	})

	qemu := guesttest.QemuPidOf(t, converter.DomainName(vmi))
	if err := l.client.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	w.final(t)
	l.expectExit(t, launcher.ExitStopped, lingerLimit)
	l.assertLeftNothing(t, qemu)
}

// shellReady types until the guest's shell on the serial line answers.
func shellReady(t *testing.T, con *guesttest.Console) {
	t.Helper()
	for i := 0; i < 10; i++ {
		if err := con.Write("echo $((6*7))\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := con.WaitFor(answer, 5*time.Second); err == nil {
			return
		}
	}
	t.Fatal("no answer from the shell on the serial console")
}

// guestValue runs script in the guest's shell, which prints name=[value], and returns value. The
// echo of the typed line holds name=[ too, but followed by a $ that no value holds.
func guestValue(t *testing.T, con *guesttest.Console, name, script string) string {
	t.Helper()
	return con.Value(t, name, script, 30*time.Second)
}

// guestFile mounts the ISO on the guest's device dev and returns the file's content.
func guestFile(t *testing.T, con *guesttest.Console, dev, name string) string {
	t.Helper()
	return guestValue(t, con, "content", fmt.Sprintf(`mkdir -p /mnt && mount -t iso9660 -o ro /dev/%s /mnt && echo "content=[$(cat /mnt%s)]"; umount /mnt`, dev, name))
}

// guestSector returns the letters, digits and dashes of the first sector of the guest's disk.
func guestSector(t *testing.T, con *guesttest.Console, dev string) string {
	t.Helper()
	return guestValue(t, con, "sector", fmt.Sprintf(`echo "sector=[$(dd if=/dev/%s bs=512 count=1 2>/dev/null | tr -cd 'a-z0-9-')]"`, dev))
}
