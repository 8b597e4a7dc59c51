package vmbda

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmbdacondition"
	"github.com/d8virt/virtualization-controller/pkg/controller/vm"
	"github.com/d8virt/virtualization-controller/pkg/importerprogress"
)

// Finalizer keeps an attachment until its disk is unplugged from the guest.
const Finalizer = "virtualization.deckhouse.io/vmbda-cleanup"

// DeviceLimit is the most block devices a machine has, those of its spec and those attachments
// plug in together (the reference module's limit).
const DeviceLimit = 16

// Inputs are what a decision is made from, read afresh each reconcile.
type Inputs struct {
	VMBDA *v1alpha2.VirtualMachineBlockDeviceAttachment
	// VM is the friendly VirtualMachine, nil when not found.
	VM *v1alpha2.VirtualMachine
	// VMI is the internal VMI of the VM, nil when there is none.
	VMI *kubevirtv1.VirtualMachineInstance
	// Disk is the VirtualDisk of a VirtualDisk ref, nil when not found.
	Disk *v1alpha2.VirtualDisk
	// Image is the VirtualImage of a VirtualImage ref, nil when not found.
	Image *v1alpha2.VirtualImage
	// ClusterImage is the ClusterVirtualImage of a ClusterVirtualImage ref, nil when not found.
	ClusterImage *v1alpha2.ClusterVirtualImage
	// Copy is how the copy of an image in DVCR onto the attachment's claim went (copy.go).
	Copy CopyState
	// SpecUsers are the VirtualMachines of the namespace whose spec.blockDeviceRefs name the disk.
	SpecUsers []string
	// Others are the namespace's attachments (of any device and machine).
	Others []v1alpha2.VirtualMachineBlockDeviceAttachment
	Now    metav1.Time
}

// Action is what the reconciler does besides writing the status.
type Action int

// The actions.
const (
	ActionNone Action = iota
	ActionAddFinalizer
	// ActionAttach calls addvolume with Decision.Add.
	ActionAttach
	// ActionDetach calls removevolume for Decision.Volume.
	ActionDetach
	ActionRemoveFinalizer
	// ActionCopy takes the next step of copying Decision.Copy onto the attachment's claim.
	ActionCopy
)

func (a Action) String() string {
	return [...]string{"None", "AddFinalizer", "Attach", "Detach", "RemoveFinalizer", "Copy"}[a]
}

// Decision is the next step and the status to write.
type Decision struct {
	Action Action
	// Volume is the name of the attachment's volume in the VMI.
	Volume string
	// Add is the addvolume body of ActionAttach.
	Add *kubevirtv1.AddVolumeOptions
	// Copy is what ActionCopy copies, and onto which node's claim.
	Copy *CopyRequest
	// Status is written unless the attachment is gone (ActionRemoveFinalizer).
	Status v1alpha2.VirtualMachineBlockDeviceAttachmentStatus
}

// VolumeName is the attachment's volume in the VMI: the name the VM controller gives the same
// device in a spec, so the VM reports it and a device in both is a conflict.
func VolumeName(ref v1alpha2.VMBDAObjectRef) string {
	return vm.VolumeName(v1alpha2.BlockDeviceSpecRef{Kind: v1alpha2.BlockDeviceKind(ref.Kind), Name: ref.Name})
}

// Decide is the next step for an attachment. It is pure.
func Decide(in Inputs) Decision {
	a := in.VMBDA
	volume := VolumeName(a.Spec.BlockDeviceRef)
	d := Decision{Volume: volume, Status: v1alpha2.VirtualMachineBlockDeviceAttachmentStatus{
		Phase: a.Status.Phase, VirtualMachineName: a.Spec.VirtualMachineName,
		Conditions: append([]metav1.Condition(nil), a.Status.Conditions...), ObservedGeneration: a.Generation,
	}}
	set := func(t vmbdacondition.Type, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{Type: string(t), Status: status, Reason: reason,
			Message: msg, ObservedGeneration: a.Generation, LastTransitionTime: in.Now})
	}
	hp := hotplugOf(in.VMI, volume)
	if a.DeletionTimestamp != nil {
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseTerminating
		switch {
		case !hasFinalizer(a):
		case hp.inSpec && hp.running:
			d.Action = ActionDetach
			set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached), "the disk is being unplugged from the guest")
		case hp.status != nil && hp.running:
			// Unplugged from the spec; the guest still releases it.
			set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached),
				fmt.Sprintf("the disk is being unplugged from the guest (volume phase %s)", hp.status.Phase))
		default:
			d.Action = ActionRemoveFinalizer
		}
		return d
	}
	if !hasFinalizer(a) {
		d.Action = ActionAddFinalizer
		return d
	}
	dev := device(a.Spec.BlockDeviceRef, in.Disk, in.Image, in.ClusterImage)
	diskOK, diskMsg := dev.Ready, dev.Reason
	set(vmbdacondition.TypeBlockDeviceReady, diskOK, reasonBool(diskOK, string(vmbdacondition.ReasonBlockDeviceReady), string(vmbdacondition.ReasonBlockDeviceNotReady)), diskMsg)
	vmOK, vmMsg := vmReady(a.Spec.VirtualMachineName, in.VM, in.VMI)
	set(vmbdacondition.TypeVirtualMachineReady, vmOK, reasonBool(vmOK, string(vmbdacondition.ReasonVirtualMachineReady), string(vmbdacondition.ReasonVirtualMachineNotReady)), vmMsg)

	if msg := conflict(a, in.SpecUsers, in.Others, dev.ReadOnly); msg != "" {
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseFailed
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonConflict), msg)
		return d
	}
	used := 0
	if in.VM != nil {
		used = devicesBesides(a, in.VM, in.Others)
		room := used < DeviceLimit || hp.inSpec
		msg := fmt.Sprintf("VirtualMachine %s has %d other block devices of at most %d", a.Spec.VirtualMachineName, used, DeviceLimit)
		if !room {
			msg = fmt.Sprintf("VirtualMachine %s already has %d block devices, the most it can have: detach one (or remove it from spec.blockDeviceRefs) and the disk is plugged in", a.Spec.VirtualMachineName, used)
		}
		set(vmbdacondition.TypeDiskAttachmentCapacityAvailable, room, reasonBool(room, string(vmbdacondition.ReasonCapacityAvailable), string(vmbdacondition.ReasonCapacityReached)), msg)
	}
	switch {
	case dev.Unsupported:
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseFailed
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached), diskMsg)
		return d
	case !vmOK || (!diskOK && !hp.inSpec):
		// A disk already plugged in stays so whatever becomes of it (a deleted one is kept
		// until it is unplugged).
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhasePending
		msg := vmMsg
		if !diskOK {
			msg = diskMsg
		}
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached), msg+"; the disk is plugged in once both are ready")
		return d
	case !hp.inSpec && used >= DeviceLimit:
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhasePending
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached), "virtual machine block device capacity reached")
		return d
	case !hp.inSpec && dev.Copy != nil && in.Copy.Failed != "":
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseFailed
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached),
			fmt.Sprintf("the copy of %s %s for the hot-plug failed: %s", a.Spec.BlockDeviceRef.Kind, a.Spec.BlockDeviceRef.Name, in.Copy.Failed))
		return d
	case !hp.inSpec && dev.Copy != nil && (!in.Copy.Filled || (in.Copy.Node != "" && in.Copy.Node != in.VMI.Status.NodeName)):
		// Not copied yet, or copied onto a volume of another node (the VM restarted elsewhere).
		d.Action = ActionCopy
		node := in.VMI.Status.NodeName
		d.Copy = &CopyRequest{Image: dev.Copy.Image, Size: dev.Copy.Size, Node: node}
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseInProgress
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonNotAttached),
			fmt.Sprintf("%s %s is being copied from DVCR onto a claim on node %s%s, then it is plugged in", a.Spec.BlockDeviceRef.Kind, a.Spec.BlockDeviceRef.Name, node, copyProgress(in.Copy.Progress)))
		return d
	case !hp.inSpec:
		claim := dev.ClaimName
		if dev.Copy != nil {
			claim = CopyClaimName(a)
		}
		d.Action = ActionAttach
		d.Add = AddVolumeOptions(volume, a.Spec.BlockDeviceRef.Name, claim, dev.ReadOnly, dev.CDROM)
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseInProgress
		set(vmbdacondition.TypeAttached, false, string(vmbdacondition.ReasonAttachmentRequestSent), "the disk is being plugged into the guest")
		return d
	case hp.status != nil && hp.status.Phase == kubevirtv1.VolumeReady:
		d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseAttached
		set(vmbdacondition.TypeAttached, true, string(vmbdacondition.ReasonAttached),
			fmt.Sprintf("%s %s is plugged into VirtualMachine %s as %s", a.Spec.BlockDeviceRef.Kind, a.Spec.BlockDeviceRef.Name, a.Spec.VirtualMachineName, hp.status.Target))
		return d
	}
	d.Status.Phase = v1alpha2.BlockDeviceAttachmentPhaseInProgress
	msg := "the disk is being plugged into the guest"
	reason := vmbdacondition.ReasonAttachmentRequestSent
	if s := hp.status; s != nil {
		msg = fmt.Sprintf("%s (volume phase %s)", msg, s.Phase)
		if s.Message != "" {
			// The core's report of a failed attempt (FailedHotplugSync): it tries again.
			msg, reason = s.Message, vmbdacondition.ReasonNotAttached
		}
	}
	set(vmbdacondition.TypeAttached, false, string(reason), msg)
	return d
}

// copyProgress is how far a running copy is, as the condition tells it (" (45.2% at 12.0Mi/s)"),
// "" when unknown.
func copyProgress(p *importerprogress.Progress) string {
	if p == nil {
		return ""
	}
	if pct, ok := p.Percent(); ok {
		return fmt.Sprintf(" (%s at %s)", pct, p.Speed().Current)
	}
	return ""
}

// AddVolumeOptions is the addvolume body for a disk (or an image on a claim, readOnly; an ISO
// image, cdrom): its claim as a hot-pluggable volume on the SCSI bus (KubeVirt's default for
// hotplug, and the one bus a CD-ROM can be plugged into), the device's name as the serial the
// guest sees (a CD-ROM has none).
func AddVolumeOptions(volume, name, claim string, readOnly, cdrom bool) *kubevirtv1.AddVolumeOptions {
	disk := &kubevirtv1.Disk{Name: volume, Serial: name,
		DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI, ReadOnly: readOnly}}}
	if cdrom {
		disk = &kubevirtv1.Disk{Name: volume,
			DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSCSI, ReadOnly: ptr.To(true)}}}
	}
	return &kubevirtv1.AddVolumeOptions{
		Name: volume,
		Disk: disk,
		VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			Hotpluggable:                      true,
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly},
		}},
	}
}

// hotplug is the attachment's volume as the VMI shows it.
type hotplug struct {
	running bool
	inSpec  bool
	status  *kubevirtv1.VolumeStatus
}

func hotplugOf(vmi *kubevirtv1.VirtualMachineInstance, volume string) hotplug {
	var h hotplug
	if vmi == nil {
		return h
	}
	h.running = vmi.Status.Phase == kubevirtv1.Running && vmi.DeletionTimestamp == nil
	// Only a hot-plugged volume of that name is the attachment's: a disk of the VM's own spec
	// (an attachment refused as a Conflict) has the same volume name and must stay.
	for _, v := range vmi.Spec.Volumes {
		h.inSpec = h.inSpec || (v.Name == volume && hotpluggable(v))
	}
	for i := range vmi.Status.VolumeStatus {
		if st := &vmi.Status.VolumeStatus[i]; st.Name == volume && st.HotplugVolume != nil {
			h.status = st
		}
	}
	return h
}

// hotpluggable says whether v came in through addvolume (KubeVirt marks its source).
func hotpluggable(v kubevirtv1.Volume) bool {
	return (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.Hotpluggable) ||
		(v.DataVolume != nil && v.DataVolume.Hotpluggable)
}

// plug is the device an attachment plugs in, as the VM controller judges a device of a spec.
type plug struct {
	Ready  bool
	Reason string
	// Unsupported: it can never be plugged in (the attachment fails).
	Unsupported bool
	ClaimName   string
	ReadOnly    bool
	CDROM       bool
	// Copy is the image in DVCR to copy onto a claim of the attachment's first: the core
	// hot-plugs claims, not container disks.
	Copy *CopySource
}

// device says whether the attachment's device can be plugged in: a VirtualDisk (Ready, or
// WaitForFirstConsumer: the attachment Pod is its consumer), or an image, read-only (a CD-ROM
// for an ISO): a VirtualImage kept on a claim as it is, one in DVCR or a ClusterVirtualImage
// through a copy onto a claim of the attachment's.
func device(ref v1alpha2.VMBDAObjectRef, disk *v1alpha2.VirtualDisk, vi *v1alpha2.VirtualImage, cvi *v1alpha2.ClusterVirtualImage) plug {
	spec := v1alpha2.BlockDeviceSpecRef{Kind: v1alpha2.BlockDeviceKind(ref.Kind), Name: ref.Name}
	switch ref.Kind {
	case v1alpha2.VMBDAObjectRefKindVirtualImage:
		if vi != nil && vi.DeletionTimestamp != nil {
			return plug{Reason: fmt.Sprintf("VirtualImage %s is being deleted", ref.Name)}
		}
		var st *v1alpha2.ImageStatus
		if vi != nil {
			st = &vi.Status.ImageStatus
		}
		return imagePlug(vm.VirtualImageDevice(spec, vi), st)
	case v1alpha2.VMBDAObjectRefKindClusterVirtualImage:
		if cvi != nil && cvi.DeletionTimestamp != nil {
			return plug{Reason: fmt.Sprintf("ClusterVirtualImage %s is being deleted", ref.Name)}
		}
		var st *v1alpha2.ImageStatus
		if cvi != nil {
			st = &cvi.Status.ImageStatus
		}
		return imagePlug(vm.ClusterVirtualImageDevice(spec, cvi), st)
	case v1alpha2.VMBDAObjectRefKindVirtualDisk:
	default:
		return plug{Unsupported: true, Reason: fmt.Sprintf("spec.blockDeviceRef.kind %s cannot be hot-plugged: only a VirtualDisk, a VirtualImage or a ClusterVirtualImage can", ref.Kind)}
	}
	if disk != nil && disk.DeletionTimestamp != nil {
		return plug{Reason: fmt.Sprintf("VirtualDisk %s is being deleted", ref.Name)}
	}
	d := vm.DiskDevice(spec, disk)
	if !d.Ready {
		return plug{Reason: d.Reason}
	}
	return plug{Ready: true, Reason: fmt.Sprintf("VirtualDisk %s is ready", ref.Name), ClaimName: d.ClaimName}
}

// imagePlug is an image's device (st its status, nil when not found): read-only, its claim, or
// a copy of its container disk in DVCR (of its unpacked size).
func imagePlug(d vm.Device, st *v1alpha2.ImageStatus) plug {
	if !d.Ready {
		return plug{Reason: d.Reason}
	}
	p := plug{Ready: true, Reason: fmt.Sprintf("%s %s is ready", d.Ref.Kind, d.Ref.Name), ClaimName: d.ClaimName, ReadOnly: true, CDROM: d.CDROM}
	if d.ClaimName == "" {
		size, err := strconv.ParseInt(st.Size.UnpackedBytes, 10, 64)
		if err != nil || size <= 0 {
			return plug{Reason: fmt.Sprintf("%s %s has no unpacked size in its status (%q)", d.Ref.Kind, d.Ref.Name, st.Size.UnpackedBytes)}
		}
		p.Copy = &CopySource{Image: d.Image, Size: size}
	}
	return p
}

func vmReady(name string, machine *v1alpha2.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (bool, string) {
	switch {
	case machine == nil:
		return false, fmt.Sprintf("VirtualMachine %s not found", name)
	case machine.DeletionTimestamp != nil:
		return false, fmt.Sprintf("VirtualMachine %s is being deleted", name)
	case machine.Status.Phase != v1alpha2.MachineRunning || vmi == nil || vmi.Status.Phase != kubevirtv1.Running:
		phase := string(machine.Status.Phase)
		if phase == "" {
			phase = "none yet"
		}
		return false, fmt.Sprintf("VirtualMachine %s is not running (phase %s)", name, phase)
	}
	return true, fmt.Sprintf("VirtualMachine %s is running", name)
}

// conflict says why the attachment cannot plug its disk in: the disk is in a VM's spec, or an
// older attachment that has not failed plugs it in (only the first one is processed, as the
// reference's). A read-only image may be in many machines, once in each.
func conflict(a *v1alpha2.VirtualMachineBlockDeviceAttachment, specUsers []string, others []v1alpha2.VirtualMachineBlockDeviceAttachment, shared bool) string {
	ref := a.Spec.BlockDeviceRef
	for _, u := range specUsers {
		if !shared || u == a.Spec.VirtualMachineName {
			return fmt.Sprintf("%s %s is already attached to VirtualMachine %s (its spec.blockDeviceRefs)", ref.Kind, ref.Name, u)
		}
	}
	for i := range others {
		o := &others[i]
		if o.UID == a.UID || o.Spec.BlockDeviceRef != ref || o.DeletionTimestamp != nil ||
			o.Status.Phase == v1alpha2.BlockDeviceAttachmentPhaseFailed || !older(o, a) ||
			(shared && o.Spec.VirtualMachineName != a.Spec.VirtualMachineName) {
			continue
		}
		return fmt.Sprintf("%s %s is already attached to VirtualMachine %s by VirtualMachineBlockDeviceAttachment %s",
			ref.Kind, ref.Name, o.Spec.VirtualMachineName, o.Name)
	}
	return ""
}

// devicesBesides counts the block devices machine has besides a's: those of its spec and those
// its other attachments plug in (plugged in or on the way, or older than a and not failed: the
// first come are served first).
func devicesBesides(a *v1alpha2.VirtualMachineBlockDeviceAttachment, machine *v1alpha2.VirtualMachine, others []v1alpha2.VirtualMachineBlockDeviceAttachment) int {
	n := len(machine.Spec.BlockDeviceRefs)
	for i := range others {
		o := &others[i]
		if o.UID == a.UID || o.Spec.VirtualMachineName != a.Spec.VirtualMachineName || o.DeletionTimestamp != nil || o.Status.Phase == v1alpha2.BlockDeviceAttachmentPhaseFailed {
			continue
		}
		if o.Status.Phase == v1alpha2.BlockDeviceAttachmentPhaseAttached || o.Status.Phase == v1alpha2.BlockDeviceAttachmentPhaseInProgress || older(o, a) {
			n++
		}
	}
	return n
}

// older: o was created before a (the name breaks a tie).
func older(o, a *v1alpha2.VirtualMachineBlockDeviceAttachment) bool {
	if !o.CreationTimestamp.Equal(&a.CreationTimestamp) {
		return o.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return o.Name < a.Name
}

func hasFinalizer(a *v1alpha2.VirtualMachineBlockDeviceAttachment) bool {
	return slices.Contains(a.Finalizers, Finalizer)
}

func reasonBool(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
