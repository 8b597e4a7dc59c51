package module

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/testenv"
)

// vmbdaManifest: a blank disk to plug in (on the default StorageClass, a Filesystem one: the
// core's launcher makes its disk.img of the claim's size when it is plugged in), and the
// attachment that plugs it into the VM %[1]s.
const vmbdaManifest = `apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualDisk
metadata:
  name: module-e2e-hotplug
  namespace: default
spec:
  persistentVolumeClaim:
    size: 64Mi
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug
  namespace: default
spec:
  virtualMachineName: %[1]s
  blockDeviceRef: {kind: VirtualDisk, name: module-e2e-hotplug}
`

// vmbdaRefusals: the same disk again (an older attachment has it), the VM's own root disk (in
// its spec), and a VM and a disk that do not exist.
const vmbdaRefusals = `apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug-again
  namespace: default
spec:
  virtualMachineName: %[1]s
  blockDeviceRef: {kind: VirtualDisk, name: module-e2e-hotplug}
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug-root
  namespace: default
spec:
  virtualMachineName: %[1]s
  blockDeviceRef: {kind: VirtualDisk, name: %[2]s}
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug-absent
  namespace: default
spec:
  virtualMachineName: module-e2e-absent
  blockDeviceRef: {kind: VirtualDisk, name: module-e2e-absent}
`

// checkVirtualMachineBlockDeviceAttachment hot-plugs a VirtualDisk made from the ClusterVirtualImage
// root into the running friendly VM vm (whose spec has the disk root, made from that image) through a VirtualMachineBlockDeviceAttachment,
// all through the chart's controller, virtualization-api and the core: the attachment becomes
// Attached, the VM reports the disk as hotplugged, the guest sees a SCSI disk of the disk's size
// and writes to it; the error cases fail or wait with the
// reference's reasons; the spec is immutable; deleting the attachment unplugs the disk (the guest
// no longer sees it) and a new attachment brings it back with the data; a deleted disk stays
// while attached and goes once the attachment does.
//
// checkVirtualMachine names the disk and its image alike (module-e2e-root): root is both.
func checkVirtualMachineBlockDeviceAttachment(t *testing.T, ctx context.Context, st *stack, vm, root string) {
	t.Helper()
	t.Log("a VirtualMachineBlockDeviceAttachment hot-plugs a VirtualDisk into the running VM")
	kc := st.s.KubeconfigPath()
	dir := t.TempDir()
	write := func(name, format string, args ...any) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(fmt.Sprintf(format, args...)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("vmbda.yaml", vmbdaManifest, vm)
	refusals := write("refusals.yaml", vmbdaRefusals, vm, root)
	defer st.kubectl(t, kc, "delete", "-f", main, "--ignore-not-found", "--timeout=2m")
	defer st.kubectl(t, kc, "delete", "-f", refusals, "--ignore-not-found", "--timeout=2m")
	get := func(obj, jsonpath string) string {
		return st.kubectl(t, kc, "-n", "default", "get", obj, "-o", "jsonpath="+jsonpath)
	}
	wait := func(obj, cond string, timeout time.Duration) {
		t.Helper()
		st.kubectl(t, kc, "-n", "default", "wait", obj, "--for="+cond, "--timeout="+timeout.String())
	}
	start := time.Now()
	st.kubectl(t, kc, "apply", "-f", main)
	wait("vmbda/module-e2e-hotplug", "jsonpath={.status.phase}=Attached", 3*time.Minute)
	t.Logf("attached in %s", time.Since(start).Round(100*time.Millisecond))
	if got := get("vmbda/module-e2e-hotplug", "{.status.conditions[?(@.type=='Attached')].reason}"); got != "Attached" {
		t.Errorf("Attached reason %q", got)
	}
	hp := "{.status.blockDeviceRefs[?(@.name=='module-e2e-hotplug')]"
	wait("vm/"+vm, "jsonpath="+hp+".attached}=true", time.Minute)
	for path, want := range map[string]string{
		hp + ".hotplugged}": "true", hp + ".attached}": "true", hp + ".virtualMachineBlockDeviceAttachmentName}": "module-e2e-hotplug",
	} {
		if got := get("vm/"+vm, path); got != want {
			t.Errorf("VM %s = %q, want %q", path, got, want)
		}
	}
	out := st.kubectl(t, kc, "-n", "default", "get", "vmbda", "module-e2e-hotplug")
	for _, col := range []string{"PHASE", "VIRTUAL MACHINE NAME", "AGE", "Attached", vm} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get vmbda has no %q:\n%s", col, out)
		}
	}

	con := openConsole(t, ctx, st.kubevirt, vm)
	defer func() { _ = con.Close() }()
	dev := waitGuestDisk(t, con, true)
	// The blank disk is its size.
	sectors, err := strconv.ParseInt(guestValue(t, con, "size", `echo "size=[$(cat /sys/block/`+dev+`/size)]"`), 10, 64)
	if err != nil || sectors*512 != 64<<20 {
		t.Errorf("the guest's %s has %d sectors (%v), want the disk's 64Mi", dev, sectors, err)
	}
	guestValue(t, con, "written", `echo module-e2e-hotplug-data | dd of=/dev/`+dev+` bs=512 count=1 conv=sync 2>/dev/null && sync && echo "written=[$(echo ok)]"`)

	t.Log("the error cases, and the spec is immutable")
	st.kubectl(t, kc, "apply", "-f", refusals)
	wait("vmbda/module-e2e-hotplug-again", "jsonpath={.status.conditions[?(@.type=='Attached')].reason}=Conflict", time.Minute)
	wait("vmbda/module-e2e-hotplug-root", "jsonpath={.status.conditions[?(@.type=='Attached')].reason}=Conflict", time.Minute)
	wait("vmbda/module-e2e-hotplug-absent", "jsonpath={.status.phase}=Pending", time.Minute)
	for obj, want := range map[string]string{
		"vmbda/module-e2e-hotplug-again":  "Failed VirtualDisk module-e2e-hotplug is already attached to VirtualMachine " + vm + " by VirtualMachineBlockDeviceAttachment module-e2e-hotplug",
		"vmbda/module-e2e-hotplug-root":   "Failed VirtualDisk " + root + " is already attached to VirtualMachine " + vm + " (its spec.blockDeviceRefs)",
		"vmbda/module-e2e-hotplug-absent": "Pending VirtualMachineNotReady VirtualMachine module-e2e-absent not found BlockDeviceNotReady VirtualDisk module-e2e-absent not found",
	} {
		got := get(obj, "{.status.phase} {.status.conditions[?(@.type=='Attached')].message}")
		if strings.HasSuffix(obj, "absent") {
			got = get(obj, "{.status.phase} {.status.conditions[?(@.type=='VirtualMachineReady')].reason} {.status.conditions[?(@.type=='VirtualMachineReady')].message} {.status.conditions[?(@.type=='BlockDeviceReady')].reason} {.status.conditions[?(@.type=='BlockDeviceReady')].message}")
		}
		if got != want {
			t.Errorf("%s: %q, want %q", obj, got, want)
		}
	}
	if out := st.kubectl(t, kc, "get", "events", "-n", "default", "--field-selector", "involvedObject.name=module-e2e-hotplug-root", "-o", "jsonpath={.items[*].type} {.items[*].reason}"); !strings.Contains(out, "Warning") || !strings.Contains(out, "Conflict") {
		t.Errorf("events of the conflicting attachment: %q", out)
	}
	if out, err := testenv.KubectlInput(t, kc, "", "-n", "default", "patch", "vmbda/module-e2e-hotplug", "--type=merge", "-p", `{"spec":{"virtualMachineName":"other"}}`); err == nil || !strings.Contains(out, "spec.virtualMachineName is immutable") {
		t.Errorf("a patch of spec.virtualMachineName: %v %s", err, out)
	}
	st.kubectl(t, kc, "delete", "-f", refusals, "--timeout=1m")

	t.Log("deleting the attachment unplugs the disk; a new one brings it back with its data")
	start = time.Now()
	st.kubectl(t, kc, "-n", "default", "delete", "vmbda/module-e2e-hotplug", "--timeout=2m")
	waitGuestDisk(t, con, false)
	t.Logf("detached in %s", time.Since(start).Round(100*time.Millisecond))
	for deadline := time.Now().Add(time.Minute); get("vm/"+vm, hp+".name}") != ""; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Errorf("the VM still reports the unplugged disk: %s", get("vm/"+vm, "{.status.blockDeviceRefs}"))
			break
		}
	}
	st.kubectl(t, kc, "apply", "-f", main)
	wait("vmbda/module-e2e-hotplug", "jsonpath={.status.phase}=Attached", 3*time.Minute)
	dev = waitGuestDisk(t, con, true)
	if got := guestValue(t, con, "sector", `echo "sector=[$(dd if=/dev/`+dev+` bs=512 count=1 2>/dev/null | tr -cd 'a-z0-9-')]"`); got != "module-e2e-hotplug-data" {
		t.Errorf("the re-attached disk's first sector: %q", got)
	}

	t.Log("the disk is kept while attached, and goes once the attachment does")
	st.kubectl(t, kc, "-n", "default", "delete", "vd/module-e2e-hotplug", "--wait=false")
	wait("vd/module-e2e-hotplug", "jsonpath={.status.phase}=Terminating", time.Minute)
	if got := get("vd/module-e2e-hotplug", "{.status.conditions[?(@.type=='InUse')].message}"); !strings.Contains(got, "VirtualMachineBlockDeviceAttachment module-e2e-hotplug") {
		t.Errorf("InUse of the deleted disk: %q", got)
	}
	if got := get("vmbda/module-e2e-hotplug", "{.status.phase}"); got != "Attached" {
		t.Errorf("the attachment of a deleted disk in use: %s", got)
	}
	st.kubectl(t, kc, "-n", "default", "delete", "vmbda/module-e2e-hotplug", "--timeout=2m")
	waitGuestDisk(t, con, false)
	wait("vd/module-e2e-hotplug", "delete", 2*time.Minute)
}

// vmbdaImageManifest: a VirtualImage on a claim, made from the ClusterVirtualImage %[2]s; an ISO
// as a ClusterVirtualImage (from %[3]s); and three attachments that plug into the VM %[1]s the
// image on a claim, the ClusterVirtualImage %[2]s itself (copied from DVCR onto a claim of the
// attachment's first) and the ISO (a CD-ROM), all read-only.
const vmbdaImageManifest = `apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualImage
metadata:
  name: module-e2e-hotplug-image
  namespace: default
spec:
  storage: PersistentVolumeClaim
  dataSource:
    type: ObjectRef
    objectRef: {kind: ClusterVirtualImage, name: %[2]s}
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: ClusterVirtualImage
metadata:
  name: module-e2e-hotplug-iso
spec:
  dataSource:%[3]s
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug-image
  namespace: default
spec:
  virtualMachineName: %[1]s
  blockDeviceRef: {kind: VirtualImage, name: module-e2e-hotplug-image}
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug-cvi
  namespace: default
spec:
  virtualMachineName: %[1]s
  blockDeviceRef: {kind: ClusterVirtualImage, name: %[2]s}
---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineBlockDeviceAttachment
metadata:
  name: module-e2e-hotplug-iso
  namespace: default
spec:
  virtualMachineName: %[1]s
  blockDeviceRef: {kind: ClusterVirtualImage, name: module-e2e-hotplug-iso}
`

// checkImageAttachment hot-plugs images into the running VM vm, read-only: a VirtualImage kept
// on a claim (made from the cluster image root), root itself (in DVCR: copied onto a claim on
// the VM's node first) and an ISO (iso, an HTTP source) as a CD-ROM. The guest sees two
// read-only SCSI disks of root's size and a new CD-ROM of the ISO's size, which go when the
// attachments are deleted, with the copy's claim.
func checkImageAttachment(t *testing.T, ctx context.Context, st *stack, vm, root, iso string) {
	t.Helper()
	t.Log("VirtualMachineBlockDeviceAttachments hot-plug a VirtualImage on a claim, a ClusterVirtualImage and an ISO (a CD-ROM), read-only")
	kc := st.s.KubeconfigPath()
	manifest := filepath.Join(t.TempDir(), "vmbda-image.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(vmbdaImageManifest, vm, root, iso)), 0o600); err != nil {
		t.Fatal(err)
	}
	defer st.kubectl(t, kc, "delete", "-f", manifest, "--ignore-not-found", "--timeout=2m")
	con := openConsole(t, ctx, st.kubevirt, vm)
	defer func() { _ = con.Close() }()
	cdroms := guestValue(t, con, "sr", `echo "sr=[$(cd /sys/block && ls -d sr* 2>/dev/null | tr '\n' ' ')]"`)
	start := time.Now()
	st.kubectl(t, kc, "apply", "-f", manifest)
	for _, a := range []string{"module-e2e-hotplug-image", "module-e2e-hotplug-cvi", "module-e2e-hotplug-iso"} {
		st.kubectl(t, kc, "-n", "default", "wait", "vmbda/"+a, "--for=jsonpath={.status.phase}=Attached", "--timeout=4m")
	}
	t.Logf("the image on a claim made, the cluster images copied, all three attached in %s", time.Since(start).Round(100*time.Millisecond))
	bytesOf := func(obj string) int64 {
		n, err := strconv.ParseInt(st.kubectl(t, kc, "get", obj, "-o", "jsonpath={.status.size.unpackedBytes}"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	unpacked, isoBytes := bytesOf("cvi/"+root), bytesOf("cvi/module-e2e-hotplug-iso")
	copyClaim := st.kubectl(t, kc, "-n", "default", "get", "pvc", "-l", "virtualization.deckhouse.io/vmbda-uid="+
		st.kubectl(t, kc, "-n", "default", "get", "vmbda/module-e2e-hotplug-cvi", "-o", "jsonpath={.metadata.uid}"), "-o", "name")
	if copyClaim == "" {
		t.Error("no claim holds the copy of the ClusterVirtualImage")
	}
	disks := waitGuestDisks(t, con, 2)
	for _, dev := range disks {
		if got := guestValue(t, con, "ro", `echo "ro=[$(cat /sys/block/`+dev+`/ro)]"`); got != "1" {
			t.Errorf("the guest's %s is not read-only: ro=%s", dev, got)
		}
		sectors, err := strconv.ParseInt(guestValue(t, con, "size", `echo "size=[$(cat /sys/block/`+dev+`/size)]"`), 10, 64)
		if err != nil || sectors*512 < unpacked || sectors*512 > unpacked+1<<20 {
			t.Errorf("the guest's %s has %d sectors (%v), want the image's %d bytes", dev, sectors, err, unpacked)
		}
	}
	newCD := `x=; for d in /sys/block/sr*; do case " ` + cdroms + ` " in *" ${d##*/} "*) ;; *) [ -e $d/size ] && x="${d##*/} $(cat $d/size)";; esac; done; echo "cd=[$x]"`
	deadline := time.Now().Add(time.Minute)
	cd := strings.Fields(guestValue(t, con, "cd", newCD))
	for len(cd) != 2 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		cd = strings.Fields(guestValue(t, con, "cd", newCD))
	}
	t.Logf("the guest sees the SCSI disks %v and the new CD-ROM %v", disks, cd)
	if len(cd) != 2 {
		t.Errorf("no new CD-ROM in the guest (it had %q): %q\nconsole:\n%s", cdroms, cd, con)
	} else if sectors, err := strconv.ParseInt(cd[1], 10, 64); err != nil || sectors*512 < isoBytes || sectors*512 > isoBytes+1<<20 {
		t.Errorf("the guest's CD-ROM %s has %s sectors, want the ISO's %d bytes", cd[0], cd[1], isoBytes)
	}
	st.kubectl(t, kc, "-n", "default", "delete", "vmbda/module-e2e-hotplug-image", "vmbda/module-e2e-hotplug-cvi", "vmbda/module-e2e-hotplug-iso", "--timeout=2m")
	waitGuestDisks(t, con, 0)
	if copyClaim != "" {
		st.kubectl(t, kc, "-n", "default", "wait", copyClaim, "--for=delete", "--timeout=2m")
	}
}

// waitGuestDisk waits until the guest sees a SCSI disk (present) or none, and returns its name.
func waitGuestDisk(t *testing.T, con *guesttest.Console, present bool) string {
	t.Helper()
	want := 0
	if present {
		want = 1
	}
	if disks := waitGuestDisks(t, con, want); len(disks) > 0 {
		return disks[0]
	}
	return ""
}

// waitGuestDisks waits until the guest sees n SCSI disks, and returns their names.
func waitGuestDisks(t *testing.T, con *guesttest.Console, n int) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		disks := strings.Fields(guestValue(t, con, "disks", `echo "disks=[$(cd /sys/block && ls -d sd* 2>/dev/null | tr '\n' ' ')]"`))
		if len(disks) == n {
			return disks
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guest's SCSI disks: %q, want %d\nconsole:\n%s", disks, n, con)
		}
		time.Sleep(2 * time.Second)
	}
}

func guestValue(t *testing.T, con *guesttest.Console, name, script string) string {
	t.Helper()
	return con.Value(t, name, script, 30*time.Second)
}
