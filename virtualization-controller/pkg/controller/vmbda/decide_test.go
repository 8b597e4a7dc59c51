package vmbda

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmbdacondition"
	"github.com/d8virt/virtualization-controller/pkg/controller/vm"
)

var (
	t0  = metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	now = metav1.NewTime(t0.Add(time.Minute))
)

func attachment(name, disk string, mods ...func(*v1alpha2.VirtualMachineBlockDeviceAttachment)) *v1alpha2.VirtualMachineBlockDeviceAttachment {
	a := &v1alpha2.VirtualMachineBlockDeviceAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Generation: 1, CreationTimestamp: t0, Finalizers: []string{Finalizer}},
		Spec: v1alpha2.VirtualMachineBlockDeviceAttachmentSpec{VirtualMachineName: "vm",
			BlockDeviceRef: v1alpha2.VMBDAObjectRef{Kind: v1alpha2.VMBDAObjectRefKindVirtualDisk, Name: disk}},
	}
	for _, m := range mods {
		m(a)
	}
	return a
}

func deleting(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.DeletionTimestamp = &now }

func runningVM() *v1alpha2.VirtualMachine {
	return &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}, Status: v1alpha2.VirtualMachineStatus{Phase: v1alpha2.MachineRunning}}
}

func readyDisk(name string) *v1alpha2.VirtualDisk {
	d := &v1alpha2.VirtualDisk{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	d.Status.Phase = v1alpha2.DiskReady
	d.Status.Target.PersistentVolumeClaimName = "vd-" + name + "-claim"
	return d
}

// vmi is a running VMI; with a volume status phase, it has the volume vd-<disk> in its spec.
func vmi(disk string, phase kubevirtv1.VolumePhase, message string) *kubevirtv1.VirtualMachineInstance {
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"}}
	v.Status.Phase = kubevirtv1.Running
	if phase != "" {
		v.Spec.Volumes = []kubevirtv1.Volume{{Name: "vd-" + disk, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{Hotpluggable: true}}}}
		v.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "vd-" + disk, Phase: phase, Message: message, Target: "sda",
			HotplugVolume: &kubevirtv1.HotplugVolumeStatus{}}}
	}
	return v
}

// bootedFrom is a running VMI whose own spec (not a hot-plug) has the volume vd-<disk>.
func bootedFrom(disk string) *kubevirtv1.VirtualMachineInstance {
	v := vmi(disk, "", "")
	v.Spec.Volumes = []kubevirtv1.Volume{{Name: "vd-" + disk, VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{}}}}
	v.Status.VolumeStatus = []kubevirtv1.VolumeStatus{{Name: "vd-" + disk, Phase: kubevirtv1.VolumeReady, Target: "vda"}}
	return v
}

// imageAttachment attaches the VirtualImage img to vm.
func imageAttachment(name string) *v1alpha2.VirtualMachineBlockDeviceAttachment {
	return attachment(name, "img", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
		a.Spec.BlockDeviceRef.Kind = v1alpha2.VMBDAObjectRefKindVirtualImage
	})
}

// imageElsewhere attaches img to another machine: no conflict for a read-only image.
var imageElsewhere = attachment("elsewhere", "img", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
	a.Spec.BlockDeviceRef.Kind = v1alpha2.VMBDAObjectRefKindVirtualImage
	a.Spec.VirtualMachineName, a.Status.Phase = "other-vm", v1alpha2.BlockDeviceAttachmentPhaseAttached
	a.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
})

// imageOnClaim is the Ready VirtualImage img kept on a claim (an ISO with cdrom).
func imageOnClaim(cdrom bool) *v1alpha2.VirtualImage {
	v := &v1alpha2.VirtualImage{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "img"}}
	v.Status.Phase, v.Status.CDROM = v1alpha2.ImageReady, cdrom
	v.Status.Target.PersistentVolumeClaimName = "vi-img-claim"
	return v
}

func TestDecide(t *testing.T) {
	older := attachment("first", "data", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
		a.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
		a.Spec.VirtualMachineName = "other-vm"
		a.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseAttached
	})
	olderFailed := older.DeepCopy()
	olderFailed.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseFailed
	stopped := runningVM()
	stopped.Status.Phase = v1alpha2.MachineStopped
	wffc := readyDisk("data")
	wffc.Status.Phase = v1alpha2.DiskWaitForFirstConsumer
	notReady := readyDisk("data")
	notReady.Status.Phase = v1alpha2.DiskProvisioning
	// full has 14 devices in its spec; two attachments (one plugged in, one older) fill it.
	full := runningVM()
	for i := range 14 {
		full.Spec.BlockDeviceRefs = append(full.Spec.BlockDeviceRefs, v1alpha2.BlockDeviceSpecRef{Kind: vm.KindVirtualDisk, Name: string(rune('a' + i))})
	}
	plugged := attachment("plugged", "p", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
		a.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
		a.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseAttached
	})
	waiting := attachment("waiting", "w", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
		a.CreationTimestamp = metav1.NewTime(t0.Add(-time.Hour))
		a.Status.Phase = v1alpha2.BlockDeviceAttachmentPhasePending
	})
	younger := waiting.DeepCopy()
	younger.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	elsewhere := attachment("elsewhere", "x", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
		a.Spec.VirtualMachineName, a.Status.Phase = "other-vm", v1alpha2.BlockDeviceAttachmentPhaseAttached
	})
	cases := []struct {
		name   string
		in     Inputs
		action Action
		phase  v1alpha2.BlockDeviceAttachmentPhase
		// reason and message of the condition cond (Attached when empty).
		cond    vmbdacondition.Type
		reason  string
		message string
	}{
		{name: "a new attachment gets the finalizer first",
			in:     Inputs{VMBDA: attachment("a", "data", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.Finalizers = nil }), VM: runningVM(), VMI: vmi("data", "", ""), Disk: readyDisk("data")},
			action: ActionAddFinalizer},
		{name: "a running VM and a ready disk: addvolume",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", "", ""), Disk: readyDisk("data")},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "a disk waiting for its first consumer: addvolume (the attachment Pod is its consumer)",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", "", ""), Disk: wffc},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "the VMI has the volume, not ready yet",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", kubevirtv1.HotplugVolumeAttachedToNode, ""), Disk: readyDisk("data")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent", message: "volume phase AttachedToNode"},
		{name: "the core reports a failed hot-plug",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", kubevirtv1.HotplugVolumeMounted, "Failed to attach hotplugged volume vd-data to VM: boom"), Disk: readyDisk("data")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "NotAttached", message: "boom"},
		{name: "the volume is ready: Attached",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", kubevirtv1.VolumeReady, ""), Disk: readyDisk("data")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseAttached, reason: "Attached", message: "as sda"},
		{name: "room for one more",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: full, VMI: vmi("data", "", ""), Disk: readyDisk("data"), Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*plugged, *younger, *elsewhere}},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, cond: vmbdacondition.TypeDiskAttachmentCapacityAvailable, reason: "CapacityAvailable", message: "has 15 other block devices of at most 16"},
		{name: "the VM is full",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: full, VMI: vmi("data", "", ""), Disk: readyDisk("data"), Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*plugged, *waiting}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeDiskAttachmentCapacityAvailable, reason: "CapacityReached", message: "already has 16 block devices, the most it can have: detach one"},
		{name: "the VM is full, the disk already plugged in stays",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: full, VMI: vmi("data", kubevirtv1.VolumeReady, ""), Disk: readyDisk("data"), Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*plugged, *waiting}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseAttached, reason: "Attached"},
		{name: "the VM is not found",
			in:     Inputs{VMBDA: attachment("a", "data"), Disk: readyDisk("data")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeVirtualMachineReady, reason: "VirtualMachineNotReady", message: "VirtualMachine vm not found"},
		{name: "the VM does not run",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: stopped, Disk: readyDisk("data")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeVirtualMachineReady, reason: "VirtualMachineNotReady", message: "VirtualMachine vm is not running (phase Stopped)"},
		{name: "the disk is not found",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", "", "")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeBlockDeviceReady, reason: "BlockDeviceNotReady", message: "VirtualDisk data not found"},
		{name: "the disk is not ready",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", "", ""), Disk: notReady},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, reason: "NotAttached", message: `VirtualDisk data is not ready (phase "Provisioning"); the disk is plugged in once both are ready`},
		{name: "a plugged-in disk being deleted stays Attached (it is kept until unplugged)",
			in: Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", kubevirtv1.VolumeReady, ""), Disk: func() *v1alpha2.VirtualDisk {
				d := readyDisk("data")
				d.DeletionTimestamp = &now
				return d
			}()},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseAttached, cond: vmbdacondition.TypeBlockDeviceReady, reason: "BlockDeviceNotReady", message: "VirtualDisk data is being deleted"},
		{name: "the disk is in a VM's spec",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", kubevirtv1.VolumeReady, ""), Disk: readyDisk("data"), SpecUsers: []string{"vm"}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "Conflict", message: "VirtualDisk data is already attached to VirtualMachine vm (its spec.blockDeviceRefs)"},
		{name: "an older attachment plugs the disk in",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", "", ""), Disk: readyDisk("data"), Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*older}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "Conflict", message: "VirtualDisk data is already attached to VirtualMachine other-vm by VirtualMachineBlockDeviceAttachment first"},
		{name: "a failed older attachment is no conflict",
			in:     Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: vmi("data", "", ""), Disk: readyDisk("data"), Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*olderFailed}},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "the older attachment wins over a newer one",
			in: Inputs{VMBDA: older, VM: runningVM(), VMI: vmi("data", "", ""), Disk: readyDisk("data"),
				Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*attachment("a", "data"), *older}},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "a kind that cannot be hot-plugged",
			in: Inputs{VMBDA: attachment("a", "img", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
				a.Spec.BlockDeviceRef.Kind = "VirtualMachine"
			}), VM: runningVM(), VMI: vmi("img", "", "")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "NotAttached", message: "spec.blockDeviceRef.kind VirtualMachine cannot be hot-plugged: only a VirtualDisk, a VirtualImage or a ClusterVirtualImage can"},
		{name: "a cluster image: copied onto a claim on the VM's node first",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage()},
			action: ActionCopy, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "NotAttached", message: "ClusterVirtualImage img is being copied from DVCR onto a claim on node node1, then it is plugged in"},
		{name: "a cluster image copied: addvolume",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage(), Copy: CopyState{Filled: true}},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "a cluster image copied onto a volume of another node: copied again",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node2"), ClusterImage: clusterImage(), Copy: CopyState{Filled: true, Node: "node1"}},
			action: ActionCopy, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "NotAttached", message: "onto a claim on node node2"},
		{name: "a cluster image copied onto a volume of the VM's node: addvolume",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage(), Copy: CopyState{Filled: true, Node: "node1"}},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "a cluster image whose copy failed",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage(), Copy: CopyState{Failed: "DestinationTooSmall: no room"}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "NotAttached", message: "the copy of ClusterVirtualImage img for the hot-plug failed: DestinationTooSmall: no room"},
		{name: "a cluster image not ready",
			in: Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: func() *v1alpha2.ClusterVirtualImage {
				c := clusterImage()
				c.Status.Phase = v1alpha2.ImageProvisioning
				return c
			}()},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeBlockDeviceReady, reason: "BlockDeviceNotReady", message: `ClusterVirtualImage img is not ready (phase "Provisioning")`},
		{name: "a cluster image without an unpacked size",
			in: Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: func() *v1alpha2.ClusterVirtualImage {
				c := clusterImage()
				c.Status.Size.UnpackedBytes = ""
				return c
			}()},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeBlockDeviceReady, reason: "BlockDeviceNotReady", message: "ClusterVirtualImage img has no unpacked size in its status"},
		{name: "a cluster image in the VM's spec: a Conflict before any copy",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage(), SpecUsers: []string{"vm"}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "Conflict"},
		{name: "a cluster image while the VM does not run: no copy yet",
			in:     Inputs{VMBDA: clusterImageAttachment(), VM: stopped, ClusterImage: clusterImage()},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeVirtualMachineReady, reason: "VirtualMachineNotReady"},
		{name: "an image in DVCR: copied first",
			in: Inputs{VMBDA: imageAttachment("a"), VM: runningVM(), VMI: vmiOn("node1"), Image: func() *v1alpha2.VirtualImage {
				v := imageOnClaim(false)
				v.Status.Target = v1alpha2.VirtualImageStatusTarget{RegistryURL: "dvcr/vi/ns/img:latest"}
				v.Status.Size.UnpackedBytes = "1048576"
				return v
			}()},
			action: ActionCopy, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "NotAttached", message: "VirtualImage img is being copied"},
		{name: "an ISO on a claim: addvolume as a CD-ROM",
			in:     Inputs{VMBDA: imageAttachment("a"), VM: runningVM(), VMI: vmi("img", "", ""), Image: imageOnClaim(true)},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "an image on a claim: addvolume, read-only",
			in:     Inputs{VMBDA: imageAttachment("a"), VM: runningVM(), VMI: vmi("img", "", ""), Image: imageOnClaim(false), SpecUsers: []string{"other-vm"}, Others: []v1alpha2.VirtualMachineBlockDeviceAttachment{*imageElsewhere}},
			action: ActionAttach, phase: v1alpha2.BlockDeviceAttachmentPhaseInProgress, reason: "AttachmentRequestSent"},
		{name: "an image on a claim already in the VM's spec",
			in:     Inputs{VMBDA: imageAttachment("a"), VM: runningVM(), VMI: vmi("img", "", ""), Image: imageOnClaim(false), SpecUsers: []string{"vm"}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "Conflict", message: "VirtualImage img is already attached to VirtualMachine vm (its spec.blockDeviceRefs)"},
		{name: "an image not found",
			in:     Inputs{VMBDA: imageAttachment("a"), VM: runningVM(), VMI: vmi("img", "", "")},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhasePending, cond: vmbdacondition.TypeBlockDeviceReady, reason: "BlockDeviceNotReady", message: "VirtualImage img not found"},
		{name: "deleted while plugged in: removevolume",
			in:     Inputs{VMBDA: attachment("a", "data", deleting), VM: runningVM(), VMI: vmi("data", kubevirtv1.VolumeReady, ""), Disk: readyDisk("data")},
			action: ActionDetach, phase: v1alpha2.BlockDeviceAttachmentPhaseTerminating, reason: "NotAttached", message: "being unplugged"},
		{name: "deleted, the guest still releases the disk",
			in: Inputs{VMBDA: attachment("a", "data", deleting), VM: runningVM(), Disk: readyDisk("data"), VMI: func() *kubevirtv1.VirtualMachineInstance {
				v := vmi("data", kubevirtv1.HotplugVolumeDetaching, "")
				v.Spec.Volumes = nil
				return v
			}()},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseTerminating, reason: "NotAttached", message: "volume phase Detaching"},
		{name: "deleted and unplugged: the finalizer goes",
			in:     Inputs{VMBDA: attachment("a", "data", deleting), VM: runningVM(), VMI: vmi("data", "", ""), Disk: readyDisk("data")},
			action: ActionRemoveFinalizer, phase: v1alpha2.BlockDeviceAttachmentPhaseTerminating},
		{name: "deleted after a Conflict over the VM's own disk: the finalizer goes, the disk stays",
			in:     Inputs{VMBDA: attachment("a", "data", deleting), VM: runningVM(), VMI: bootedFrom("data"), Disk: readyDisk("data")},
			action: ActionRemoveFinalizer, phase: v1alpha2.BlockDeviceAttachmentPhaseTerminating},
		{name: "the VM booted from the disk: a Conflict, not an attachment in progress",
			in: Inputs{VMBDA: attachment("a", "data"), VM: runningVM(), VMI: bootedFrom("data"), Disk: readyDisk("data"),
				SpecUsers: []string{"vm"}},
			action: ActionNone, phase: v1alpha2.BlockDeviceAttachmentPhaseFailed, reason: "Conflict"},
		{name: "deleted while the VM does not run: the finalizer goes",
			in:     Inputs{VMBDA: attachment("a", "data", deleting), VM: stopped},
			action: ActionRemoveFinalizer, phase: v1alpha2.BlockDeviceAttachmentPhaseTerminating},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			d := Decide(tc.in)
			if d.Action != tc.action {
				t.Errorf("action = %s, want %s", d.Action, tc.action)
			}
			if d.Status.Phase != tc.phase {
				t.Errorf("phase = %q, want %q", d.Status.Phase, tc.phase)
			}
			if d.Status.VirtualMachineName != tc.in.VMBDA.Spec.VirtualMachineName || d.Status.ObservedGeneration != 1 {
				t.Errorf("status names VM %q at generation %d", d.Status.VirtualMachineName, d.Status.ObservedGeneration)
			}
			if tc.reason == "" {
				return
			}
			cond := tc.cond
			if cond == "" {
				cond = vmbdacondition.TypeAttached
			}
			c := meta.FindStatusCondition(d.Status.Conditions, string(cond))
			if c == nil {
				t.Fatalf("no condition %s in %+v", cond, d.Status.Conditions)
			}
			if c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Errorf("%s = %s %q, want %s containing %q", cond, c.Reason, c.Message, tc.reason, tc.message)
			}
		})
	}
}

func TestAddVolumeOptions(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		opts := AddVolumeOptions("vd-data", "data", "vd-data-claim", readOnly, false)
		pvc := opts.VolumeSource.PersistentVolumeClaim
		if opts.Name != "vd-data" || opts.Disk.Name != "vd-data" || opts.Disk.Serial != "data" || opts.Disk.Disk.Bus != kubevirtv1.DiskBusSCSI ||
			pvc == nil || !pvc.Hotpluggable || pvc.ClaimName != "vd-data-claim" || pvc.ReadOnly != readOnly || opts.Disk.Disk.ReadOnly != readOnly {
			t.Errorf("AddVolumeOptions(readOnly %v) = %+v", readOnly, opts)
		}
	}
	opts := AddVolumeOptions("vi-iso", "iso", "vi-iso-claim", true, true)
	if cd := opts.Disk.CDRom; cd == nil || opts.Disk.Disk != nil || cd.Bus != kubevirtv1.DiskBusSCSI || cd.ReadOnly == nil || !*cd.ReadOnly ||
		opts.Disk.Serial != "" || !opts.VolumeSource.PersistentVolumeClaim.ReadOnly {
		t.Errorf("AddVolumeOptions(cdrom) disk = %+v", opts.Disk)
	}
}

func TestPhaseEvent(t *testing.T) {
	cases := []struct {
		phase        v1alpha2.BlockDeviceAttachmentPhase
		reason, kind string
	}{
		{v1alpha2.BlockDeviceAttachmentPhaseAttached, "Attached", "Normal"},
		{v1alpha2.BlockDeviceAttachmentPhaseFailed, "Conflict", "Warning"},
		{v1alpha2.BlockDeviceAttachmentPhasePending, "NotAttached", "Warning"},
	}
	for _, tc := range cases {
		s := v1alpha2.VirtualMachineBlockDeviceAttachmentStatus{Phase: tc.phase,
			Conditions: []metav1.Condition{{Type: "Attached", Reason: tc.reason, Message: "why"}}}
		e := PhaseEvent(s)
		if e.Type != tc.kind || e.Reason != tc.reason || e.Note != "Phase "+string(tc.phase)+": why" {
			t.Errorf("PhaseEvent(%s) = %+v", tc.phase, e)
		}
	}
}

// clusterImageAttachment attaches the ClusterVirtualImage img to vm.
func clusterImageAttachment() *v1alpha2.VirtualMachineBlockDeviceAttachment {
	return attachment("a", "img", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) {
		a.Spec.BlockDeviceRef.Kind = v1alpha2.VMBDAObjectRefKindClusterVirtualImage
	})
}

// clusterImage is the Ready ClusterVirtualImage img in DVCR, an ISO of 1 MiB.
func clusterImage() *v1alpha2.ClusterVirtualImage {
	c := &v1alpha2.ClusterVirtualImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}}
	c.Status.Phase, c.Status.CDROM = v1alpha2.ImageReady, true
	c.Status.Target.RegistryURL = "dvcr/cvi/img:latest"
	c.Status.Size.UnpackedBytes = "1048576"
	return c
}

// vmiOn is a running VMI on node, without the attachment's volume.
func vmiOn(node string) *kubevirtv1.VirtualMachineInstance {
	v := vmi("img", "", "")
	v.Status.NodeName = node
	return v
}

func TestDecideClusterImage(t *testing.T) {
	a := clusterImageAttachment()
	d := Decide(Inputs{VMBDA: a, VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage(), Now: now})
	if d.Action != ActionCopy || *d.Copy != (CopyRequest{Image: "dvcr/cvi/img:latest", Size: 1 << 20, Node: "node1"}) {
		t.Fatalf("before the copy: %s %+v", d.Action, d.Copy)
	}
	d = Decide(Inputs{VMBDA: a, VM: runningVM(), VMI: vmiOn("node1"), ClusterImage: clusterImage(), Copy: CopyState{Filled: true}, Now: now})
	pvc := d.Add.VolumeSource.PersistentVolumeClaim
	if d.Action != ActionAttach || d.Volume != "cvi-img" || pvc.ClaimName != CopyClaimName(a) || !pvc.ReadOnly || d.Add.Disk.CDRom == nil {
		t.Fatalf("after the copy: %s, add %+v", d.Action, d.Add)
	}
}

func TestDecideImageOnClaim(t *testing.T) {
	d := Decide(Inputs{VMBDA: imageAttachment("a"), VM: runningVM(), VMI: vmi("img", "", ""), Image: imageOnClaim(false), Now: now})
	if d.Action != ActionAttach || d.Volume != "vi-img" || d.Add.VolumeSource.PersistentVolumeClaim.ClaimName != "vi-img-claim" ||
		!d.Add.VolumeSource.PersistentVolumeClaim.ReadOnly || !d.Add.Disk.Disk.ReadOnly {
		t.Fatalf("decision %+v, add %+v", d, d.Add)
	}
}
