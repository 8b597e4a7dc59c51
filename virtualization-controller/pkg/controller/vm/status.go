package vm

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmclasscondition"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// maxTransitions is how many phase changes status.stats keeps.
const maxTransitions = 10

// The internal VMI's annotations where the core's virt-handler keeps the QEMU and libvirt
// versions its launcher runs the guest with (kubevirt-core's launcherapi).
const (
	AnnotationQEMUVersion    = "kubevirt.io/qemu-version"
	AnnotationLibvirtVersion = "kubevirt.io/libvirt-version"
)

// StatusInputs are what the status is computed from.
type StatusInputs struct {
	VM *v1alpha2.VirtualMachine
	// Class is the VM's class, nil when it has none or it is not found (ClassProblem says which).
	Class        *v1alpha3.VirtualMachineClass
	ClassProblem string
	Devices      []Device
	// Attachments are the VirtualMachineBlockDeviceAttachments that name the VM.
	Attachments []v1alpha2.VirtualMachineBlockDeviceAttachment
	// ProvisioningProblem says why the cloud-init configuration cannot be used; empty when it can.
	ProvisioningProblem string
	// IPAddress is the VM's VirtualMachineIPAddress, nil when it has none.
	IPAddress *v1alpha2.VirtualMachineIPAddress
	Internal  *kubevirtv1.VirtualMachine
	VMI       *kubevirtv1.VirtualMachineInstance
	Changes   []v1alpha2.RestartAwaitingChange
	// ClassChanged: the VM's class changed since the running guest was built from it.
	ClassChanged bool
	Now          metav1.Time
}

// AwaitsRestart: the running guest's configuration is not the desired one.
func (in *StatusInputs) AwaitsRestart() bool { return len(in.Changes) > 0 || in.ClassChanged }

// DependenciesReady: the class, every block device, the provisioning and the IP address can be
// used, so the internal VM can be built.
func (in *StatusInputs) DependenciesReady() bool {
	if in.Class == nil || in.ProvisioningProblem != "" || in.IPAddress == nil || in.IPAddress.Status.Address == "" {
		return false
	}
	for _, d := range in.Devices {
		if !d.Ready {
			return false
		}
	}
	return true
}

// Phase is the VM's phase from its internal VM and VMI.
func Phase(in *StatusInputs) v1alpha2.MachinePhase {
	vmi := in.VMI
	switch {
	case in.VM.DeletionTimestamp != nil:
		return v1alpha2.MachineTerminating
	case in.Internal == nil:
		return v1alpha2.MachinePending
	case vmi == nil:
		if len(in.Internal.Status.StateChangeRequests) > 0 && in.Internal.Status.StateChangeRequests[0].Action == kubevirtv1.StartRequest {
			return v1alpha2.MachineStarting
		}
		if StartPending(in.VM) {
			return v1alpha2.MachineStarting
		}
		return v1alpha2.MachineStopped
	case vmi.DeletionTimestamp != nil:
		return v1alpha2.MachineStopping
	}
	switch vmi.Status.Phase {
	case kubevirtv1.Running:
		if vmiCondition(vmi, kubevirtv1.VirtualMachineInstancePaused) {
			return v1alpha2.MachinePause
		}
		if m := vmi.Status.MigrationState; m != nil && !m.Completed && !m.Failed && m.StartTimestamp != nil {
			return v1alpha2.MachineMigrating
		}
		return v1alpha2.MachineRunning
	case kubevirtv1.Succeeded, kubevirtv1.Failed:
		return v1alpha2.MachineStopped
	default:
		return v1alpha2.MachineStarting
	}
}

func vmiCondition(vmi *kubevirtv1.VirtualMachineInstance, t kubevirtv1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Status is the VM's status: the old one's conditions keep their transition times.
func Status(in *StatusInputs) v1alpha2.VirtualMachineStatus {
	vm := in.VM
	st := *vm.Status.DeepCopy()
	st.Phase = Phase(in)
	st.ObservedGeneration = vm.Generation
	st.RestartAwaitingChanges = in.Changes
	st.NodeName, st.GuestOSInfo = "", v1alpha2.GuestOSInfo{}
	vmi := in.VMI
	if vmi != nil && vmi.DeletionTimestamp == nil && vmi.Status.Phase == kubevirtv1.Running {
		st.NodeName = vmi.Status.NodeName
		g := vmi.Status.GuestOSInfo
		st.GuestOSInfo = v1alpha2.GuestOSInfo{
			Name: g.Name, PrettyName: g.PrettyName, ID: g.ID, Version: g.Version, VersionID: g.VersionID,
			KernelRelease: g.KernelRelease, KernelVersion: g.KernelVersion, Machine: g.Machine,
		}
		// As the reference module: the versions of the last run, kept while the VM is stopped.
		st.Versions = v1alpha2.Versions{Qemu: vmi.Annotations[AnnotationQEMUVersion], Libvirt: vmi.Annotations[AnnotationLibvirtVersion]}
	}
	st.IPAddress, st.VirtualMachineIPAddressName = "", ""
	if ip := in.IPAddress; ip != nil {
		st.VirtualMachineIPAddressName, st.IPAddress = ip.Name, ip.Status.Address
	}
	st.BlockDeviceRefs = blockDeviceStatus(in)
	st.Resources = resources(in)
	if st.Stats == nil {
		st.Stats = &v1alpha2.VirtualMachineStats{}
	}
	if n := len(st.Stats.PhasesTransitions); n == 0 || st.Stats.PhasesTransitions[n-1].Phase != st.Phase {
		st.Stats.PhasesTransitions = append(st.Stats.PhasesTransitions, v1alpha2.VirtualMachinePhaseTransition{Phase: st.Phase, Timestamp: in.Now})
		if n := len(st.Stats.PhasesTransitions); n > maxTransitions {
			st.Stats.PhasesTransitions = st.Stats.PhasesTransitions[n-maxTransitions:]
		}
	}
	st.MigrationState = MigrationState(st.MigrationState, in.VMI)
	for _, c := range conditions(in) {
		c.ObservedGeneration = vm.Generation
		c.LastTransitionTime = in.Now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	for _, o := range []struct {
		t vmcondition.Type
		c *metav1.Condition
	}{
		{vmcondition.TypeSizingPolicyMatched, SizingCondition(vm, in.Class)},
		{vmcondition.TypeMigratable, MigratableCondition(in.VMI)},
	} {
		if o.c == nil {
			meta.RemoveStatusCondition(&st.Conditions, string(o.t))
			continue
		}
		o.c.ObservedGeneration, o.c.LastTransitionTime = vm.Generation, in.Now
		meta.SetStatusCondition(&st.Conditions, *o.c)
	}
	st.Stats.LaunchTimeDuration = LaunchDurations(st.Stats.LaunchTimeDuration, st.Stats.PhasesTransitions, agentSince(st.Conditions))
	return st
}

func conditions(in *StatusInputs) []metav1.Condition {
	cond := func(t vmcondition.Type, ok bool, yes, no vmcondition.Reason, msg string) metav1.Condition {
		c := metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, Reason: string(yes), Message: msg}
		if !ok {
			c.Status, c.Reason = metav1.ConditionFalse, string(no)
		}
		return c
	}
	var notReady []string
	for _, d := range in.Devices {
		if !d.Ready {
			notReady = append(notReady, d.Reason)
		}
	}
	ipReady := in.IPAddress != nil && in.IPAddress.Status.Address != ""
	ipMsg, ipReason := ipAddressMessage(IPAddressName(in.VM), in.IPAddress)
	running := in.VMI != nil && in.VMI.DeletionTimestamp == nil && in.VMI.Status.Phase == kubevirtv1.Running
	runMsg := "the guest is running"
	if !running {
		runMsg = fmt.Sprintf("the VM is %s", Phase(in))
	}
	agent := running && vmiCondition(in.VMI, kubevirtv1.VirtualMachineInstanceAgentConnected)
	agentMsg := "the guest agent answers"
	if !agent {
		agentMsg = "the guest agent is not connected"
	}
	restartMsg := restartMessage(in.Changes, in.ClassChanged)
	out := []metav1.Condition{
		cond(vmcondition.TypeClassReady, in.Class != nil, vmcondition.ReasonClassReady, vmcondition.ReasonClassNotReady, orDefault(in.ClassProblem, "the VirtualMachineClass is ready")),
		cond(vmcondition.TypeIPAddressReady, ipReady, vmcondition.ReasonIPAddressReady, ipReason, ipMsg),
		cond(vmcondition.TypeBlockDevicesReady, len(notReady) == 0, vmcondition.ReasonBlockDevicesReady, vmcondition.ReasonBlockDevicesNotReady, orDefault(strings.Join(notReady, "; "), "every block device is ready")),
		cond(vmcondition.TypeRunning, running, vmcondition.ReasonVMIsRunning, vmcondition.ReasonVMIsNotRunning, runMsg),
		cond(vmcondition.TypeAgentReady, agent, vmcondition.ReasonAgentReady, vmcondition.ReasonAgentNotReady, agentMsg),
		cond(vmcondition.TypeAwaitingRestartToApplyConfiguration, in.AwaitsRestart(), vmcondition.ReasonRestartAwaitingChangesExist, vmcondition.ReasonRestartNoNeed, restartMsg),
	}
	if in.VM.Spec.Provisioning != nil {
		out = append(out, cond(vmcondition.TypeProvisioningReady, in.ProvisioningProblem == "", vmcondition.ReasonProvisioningReady, vmcondition.ReasonProvisioningNotReady, orDefault(in.ProvisioningProblem, "the cloud-init configuration is ready")))
	}
	return out
}

// restartMessage is the AwaitingRestartToApplyConfiguration message: the changed paths of the
// spec and, in the reference's words, a changed class.
func restartMessage(changes []v1alpha2.RestartAwaitingChange, classChanged bool) string {
	var parts []string
	if len(changes) > 0 {
		paths := make([]string, 0, len(changes))
		for _, c := range changes {
			paths = append(paths, c.Path)
		}
		parts = append(parts, "a restart applies the changes of "+strings.Join(paths, ", "))
	}
	if classChanged {
		parts = append(parts, "VirtualMachineClass.spec has been modified. Waiting for the user to restart in order to apply the configuration changes.")
	}
	if len(parts) == 0 {
		return "the running VM has the spec's configuration"
	}
	return strings.Join(parts, "; ")
}

// ipAddressMessage is the IPAddressReady message and the reason when it is False: the address,
// or why there is none, in the VirtualMachineIPAddress's own words (NotAvailable; with
// virtualMachineCIDRs empty, that no range is set), else NotAssigned.
func ipAddressMessage(name string, ip *v1alpha2.VirtualMachineIPAddress) (string, vmcondition.Reason) {
	switch {
	case ip == nil:
		return fmt.Sprintf("waiting for the VirtualMachineIPAddress %s", name), vmcondition.ReasonIPAddressNotAssigned
	case ip.Status.Address != "":
		return fmt.Sprintf("VirtualMachineIPAddress %s: %s", ip.Name, ip.Status.Address), vmcondition.ReasonIPAddressNotAssigned
	}
	msg := fmt.Sprintf("VirtualMachineIPAddress %s has no address yet", ip.Name)
	if c := meta.FindStatusCondition(ip.Status.Conditions, string(vmipcondition.BoundType)); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
		return msg + ": " + c.Message, vmcondition.ReasonIPAddressNotAvailable
	}
	return msg, vmcondition.ReasonIPAddressNotAssigned
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func blockDeviceStatus(in *StatusInputs) []v1alpha2.BlockDeviceStatusRef {
	attached := map[string]bool{}
	if vmi := in.VMI; vmi != nil && vmi.Status.Phase == kubevirtv1.Running {
		for _, v := range vmi.Spec.Volumes {
			attached[v.Name] = true
		}
	}
	out := make([]v1alpha2.BlockDeviceStatusRef, 0, len(in.Devices))
	inSpec := map[string]bool{}
	for _, d := range in.Devices {
		name := VolumeName(d.Ref)
		inSpec[name] = true
		out = append(out, v1alpha2.BlockDeviceStatusRef{Kind: d.Ref.Kind, Name: d.Ref.Name, Size: d.Size, Target: name, Attached: attached[name]})
	}
	return append(out, hotplugged(in, inSpec)...)
}

// hotplugged are the devices the VM's attachments plugged into its VMI (a volume of the VMI
// that its spec does not have), attached once the VMI reports the volume Ready.
func hotplugged(in *StatusInputs, inSpec map[string]bool) []v1alpha2.BlockDeviceStatusRef {
	vmi := in.VMI
	if vmi == nil {
		return nil
	}
	status := map[string]kubevirtv1.VolumeStatus{}
	for _, s := range vmi.Status.VolumeStatus {
		status[s.Name] = s
	}
	var out []v1alpha2.BlockDeviceStatusRef
	for _, a := range in.Attachments {
		ref := v1alpha2.BlockDeviceSpecRef{Kind: v1alpha2.BlockDeviceKind(a.Spec.BlockDeviceRef.Kind), Name: a.Spec.BlockDeviceRef.Name}
		name := VolumeName(ref)
		if inSpec[name] || !slices.ContainsFunc(vmi.Spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == name }) {
			continue
		}
		s, ok := status[name]
		dev := v1alpha2.BlockDeviceStatusRef{Kind: ref.Kind, Name: ref.Name, Target: name, Hotplugged: true,
			Attached: ok && s.Phase == kubevirtv1.VolumeReady, VirtualMachineBlockDeviceAttachmentName: a.Name}
		if ok && s.PersistentVolumeClaimInfo != nil {
			if c, ok := s.PersistentVolumeClaimInfo.Capacity[corev1.ResourceStorage]; ok {
				dev.Size = c.String()
			}
		}
		out = append(out, dev)
		inSpec[name] = true
	}
	return out
}

// resources are what the internal VM's template gives the guest.
func resources(in *StatusInputs) v1alpha2.ResourcesStatus {
	if in.Internal == nil || in.Internal.Spec.Template == nil {
		return v1alpha2.ResourcesStatus{}
	}
	d := in.Internal.Spec.Template.Spec.Domain
	var r v1alpha2.ResourcesStatus
	if d.CPU != nil {
		r.CPU.Cores = int(d.CPU.Cores * d.CPU.Sockets)
		r.CPU.Topology = v1alpha2.Topology{CoresPerSocket: int(d.CPU.Cores), Sockets: int(d.CPU.Sockets)}
	}
	r.CPU.RequestedCores = d.Resources.Requests[corev1.ResourceCPU]
	if limit := d.Resources.Limits[corev1.ResourceCPU]; limit.MilliValue() > 0 {
		r.CPU.CoreFraction = fmt.Sprintf("%d%%", r.CPU.RequestedCores.MilliValue()*100/limit.MilliValue())
	}
	if d.Memory != nil && d.Memory.Guest != nil {
		r.Memory.Size = *d.Memory.Guest
	}
	return r
}

// MigratableCondition is Migratable from the running VMI's LiveMigratable condition: True, or
// False with the core's reason and message (DisksNotLiveMigratable: ...); nil (no condition)
// while there is no running VMI or the core reports none.
func MigratableCondition(vmi *kubevirtv1.VirtualMachineInstance) *metav1.Condition {
	if vmi == nil || vmi.DeletionTimestamp != nil || vmi.Status.Phase != kubevirtv1.Running {
		return nil
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type != kubevirtv1.VirtualMachineInstanceIsMigratable {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return &metav1.Condition{Type: string(vmcondition.TypeMigratable), Status: metav1.ConditionTrue,
				Reason: string(vmcondition.ReasonMigratable), Message: "the VM can be migrated live"}
		}
		msg := c.Message
		if c.Reason != "" {
			msg = fmt.Sprintf("%s: %s", c.Reason, c.Message)
		}
		return &metav1.Condition{Type: string(vmcondition.TypeMigratable), Status: metav1.ConditionFalse,
			Reason: string(vmcondition.ReasonNotMigratable), Message: msg}
	}
	return nil
}

// ClassProblem is why the VM cannot use its class name (nil: not found), or "": a class being
// deleted, or a Discovery class that has not found its processor features (its machines would
// get the bare baseline model).
func ClassProblem(name string, class *v1alpha3.VirtualMachineClass) string {
	switch {
	case class == nil:
		return fmt.Sprintf("VirtualMachineClass %s not found", name)
	case class.DeletionTimestamp != nil:
		return fmt.Sprintf("VirtualMachineClass %s is being deleted", name)
	case class.Spec.CPU.Type == v1alpha2.CPUTypeDiscovery && !meta.IsStatusConditionTrue(class.Status.Conditions, string(vmclasscondition.TypeDiscovered)):
		msg := fmt.Sprintf("VirtualMachineClass %s has not discovered its processor features yet", name)
		if c := meta.FindStatusCondition(class.Status.Conditions, string(vmclasscondition.TypeDiscovered)); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		return msg
	}
	return ""
}

// SizingCondition is SizingPolicyMatched False with the ways the VM breaks its class's sizing
// policy (after a change of the class: the webhook refuses a VM that breaks it), nil (no
// condition, as the reference module has none then) when it fits or the class is not known.
func SizingCondition(vm *v1alpha2.VirtualMachine, class *v1alpha3.VirtualMachineClass) *metav1.Condition {
	if class == nil {
		return nil
	}
	errs := SizingErrors(vm, class)
	if len(errs) == 0 {
		return nil
	}
	return &metav1.Condition{Type: string(vmcondition.TypeSizingPolicyMatched), Status: metav1.ConditionFalse,
		Reason: string(vmcondition.ReasonSizingPolicyNotMatched), Message: errs.ToAggregate().Error()}
}
