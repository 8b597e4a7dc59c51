package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults KubeVirt takes from its cluster configuration; ours has no knobs for them yet, so these
// are upstream's values for amd64.
const (
	defaultArchitecture = "amd64"
	defaultMachineType  = "q35"
)

// PresetExcludeAnnotation opts a VMI out of preset application.
const PresetExcludeAnnotation = "virtualmachineinstancepresets.admission.kubevirt.io/exclude"

// PresetAnnotation is the annotation that records an applied preset.
func PresetAnnotation(preset string) string { return "virtualmachinepreset.kubevirt.io/" + preset }

// DefaultVMI sets what KubeVirt's VMI mutator sets on create, in its order.
func DefaultVMI(vmi *kubevirtv1.VirtualMachineInstance) {
	spec := &vmi.Spec
	if spec.Architecture == "" {
		spec.Architecture = defaultArchitecture
	}
	if spec.Domain.Machine == nil {
		spec.Domain.Machine = &kubevirtv1.Machine{}
	}
	if spec.Domain.Machine.Type == "" {
		spec.Domain.Machine.Type = defaultMachineType
	}
	defaultCPURequest(spec)
	defaultGuestMemory(spec)
	defaultCPUTopology(spec)
	defaultPodNetwork(spec)
	defaultVolumeDisks(spec)
	kubevirtv1.SetObjectDefaults_VirtualMachineInstance(vmi)
	defaultDiskBuses(spec)
	if spec.Domain.CPU.Model == "" {
		spec.Domain.CPU.Model = kubevirtv1.DefaultCPUModel
	}
	// The VMI has no status subresource, so KubeVirt records the boot-time memory and topology
	// right away; hotplug compares against them later.
	if g := spec.Domain.Memory.Guest; g != nil && vmi.Status.Memory == nil {
		vmi.Status.Memory = &kubevirtv1.MemoryStatus{GuestAtBoot: g, GuestCurrent: g, GuestRequested: g}
	}
	if vmi.Status.CurrentCPUTopology == nil {
		c := spec.Domain.CPU
		vmi.Status.CurrentCPUTopology = &kubevirtv1.CPUTopology{Sockets: c.Sockets, Cores: c.Cores, Threads: c.Threads}
	}
	if !containsString(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer) {
		vmi.Finalizers = append(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer)
	}
}

func defaultCPURequest(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	r := &spec.Domain.Resources
	if !r.Limits.Cpu().IsZero() && r.Requests.Cpu().IsZero() {
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		r.Requests[corev1.ResourceCPU] = r.Limits[corev1.ResourceCPU]
	}
}

// defaultGuestMemory gives the guest what the user requested, else the limit, else one huge page.
func defaultGuestMemory(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if spec.Domain.Memory == nil {
		spec.Domain.Memory = &kubevirtv1.Memory{}
	}
	m := spec.Domain.Memory
	if m.Guest != nil {
		return
	}
	r := spec.Domain.Resources
	switch {
	case !r.Requests.Memory().IsZero():
		m.Guest = r.Requests.Memory()
	case !r.Limits.Memory().IsZero():
		m.Guest = r.Limits.Memory()
	case m.Hugepages != nil:
		if q, err := resource.ParseQuantity(m.Hugepages.PageSize); err == nil {
			m.Guest = &q
		}
	}
}

// defaultCPUTopology puts requested CPUs into sockets, which performs best, when no topology is
// given at all; a partial topology is left to the launcher.
func defaultCPUTopology(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if spec.Domain.CPU == nil {
		spec.Domain.CPU = &kubevirtv1.CPU{}
	}
	c := spec.Domain.CPU
	if c.Cores != 0 || c.Sockets != 0 || c.Threads != 0 {
		return
	}
	sockets := uint32(1)
	r := spec.Domain.Resources
	if q, ok := r.Limits[corev1.ResourceCPU]; ok {
		sockets = uint32(q.Value())
	} else if q, ok := r.Requests[corev1.ResourceCPU]; ok {
		sockets = uint32(q.Value())
	}
	c.Sockets, c.Cores, c.Threads = sockets, 1, 1
}

// defaultPodNetwork attaches the pod network with masquerade when the user named no network and
// did not turn autoattachPodInterface off.
func defaultPodNetwork(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	if a := spec.Domain.Devices.AutoattachPodInterface; a != nil && !*a {
		return
	}
	if len(spec.Networks) > 0 || len(spec.Domain.Devices.Interfaces) > 0 {
		return
	}
	spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{*kubevirtv1.DefaultMasqueradeNetworkInterface()}
	spec.Networks = []kubevirtv1.Network{*kubevirtv1.DefaultPodNetwork()}
}

// defaultVolumeDisks gives every volume that no disk or filesystem uses a disk of its own.
func defaultVolumeDisks(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	used := map[string]bool{}
	for _, d := range spec.Domain.Devices.Disks {
		used[d.Name] = true
	}
	for _, f := range spec.Domain.Devices.Filesystems {
		used[f.Name] = true
	}
	for _, v := range spec.Volumes {
		if used[v.Name] || v.MemoryDump != nil {
			continue
		}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: v.Name})
		used[v.Name] = true
	}
}

// defaultDiskBuses are amd64's: virtio disks, SATA CD-ROMs, SCSI LUNs.
func defaultDiskBuses(spec *kubevirtv1.VirtualMachineInstanceSpec) {
	for i := range spec.Domain.Devices.Disks {
		d := &spec.Domain.Devices.Disks[i].DiskDevice
		switch {
		case d.Disk != nil && d.Disk.Bus == "":
			d.Disk.Bus = kubevirtv1.DiskBusVirtio
		case d.CDRom != nil && d.CDRom.Bus == "":
			d.CDRom.Bus = kubevirtv1.DiskBusSATA
		case d.LUN != nil && d.LUN.Bus == "":
			d.LUN.Bus = kubevirtv1.DiskBusSCSI
		}
	}
}

// DefaultVM sets what KubeVirt's VM mutator sets without instance types: the template's
// architecture and machine type, so that a later change of the cluster default does not change
// the machine of an existing VM.
func DefaultVM(vm *kubevirtv1.VirtualMachine) {
	t := vm.Spec.Template
	if t == nil {
		return // the validating webhook rejects it
	}
	if t.Spec.Architecture == "" {
		t.Spec.Architecture = defaultArchitecture
	}
	if t.Spec.Domain.Machine == nil {
		t.Spec.Domain.Machine = &kubevirtv1.Machine{}
	}
	if t.Spec.Domain.Machine.Type == "" {
		t.Spec.Domain.Machine.Type = defaultMachineType
	}
}

// ErrPresetConflict means two matching presets disagree, so none can be applied.
var ErrPresetConflict = errors.New("VirtualMachinePresets cannot be applied due to conflicts")

// PresetResult tells what ApplyPresets did with each matching preset.
type PresetResult struct {
	Applied []string
	// Skipped maps a preset that matched but contributed nothing to why (its conflicts).
	Skipped map[string]error
}

// ApplyPresets merges the domains of the presets whose selector matches the VMI's labels into the
// VMI, as KubeVirt does: presets that conflict with each other fail the request; a preset field
// the VMI already sets differently is left as the VMI has it, and a preset counts as applied
// (and is recorded in an annotation) when at least one of its fields ended up in the VMI.
func ApplyPresets(vmi *kubevirtv1.VirtualMachineInstance, presets []kubevirtv1.VirtualMachineInstancePreset) (PresetResult, error) {
	res := PresetResult{Skipped: map[string]error{}}
	if vmi.Annotations[PresetExcludeAnnotation] == "true" {
		return res, nil
	}
	var matching []kubevirtv1.VirtualMachineInstancePreset
	for _, p := range presets {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.Selector)
		if err != nil {
			return res, fmt.Errorf("preset %s: selector: %w", p.Name, err)
		}
		if p.Spec.Domain != nil && sel.Matches(labels.Set(vmi.Labels)) {
			matching = append(matching, p)
		}
	}
	var conflicts []error
	for i := range matching {
		for j := range i {
			if errs := domainConflicts(matching[i].Spec.Domain, matching[j].Spec.Domain); len(errs) > 0 {
				conflicts = append(conflicts, fmt.Errorf("presets '%s' and '%s' conflict: %w", matching[i].Name, matching[j].Name, errors.Join(errs...)))
			}
		}
	}
	if len(conflicts) > 0 {
		return res, fmt.Errorf("%w: %w", ErrPresetConflict, errors.Join(conflicts...))
	}
	for _, p := range matching {
		conflictsWithVMI := errors.Join(domainConflicts(p.Spec.Domain, &vmi.Spec.Domain)...)
		if !mergeDomain(p.Spec.Domain, &vmi.Spec.Domain) {
			res.Skipped[p.Name] = conflictsWithVMI
			continue
		}
		if vmi.Annotations == nil {
			vmi.Annotations = map[string]string{}
		}
		vmi.Annotations[PresetAnnotation(p.Name)] = kubevirtv1.GroupVersion.String()
		res.Applied = append(res.Applied, p.Name)
	}
	return res, nil
}

// domainConflicts lists the fields both domains set differently.
func domainConflicts(preset, vmi *kubevirtv1.DomainSpec) []error {
	var errs []error
	differ := func(name string, a, b any) {
		if !equality.Semantic.DeepEqual(a, b) {
			errs = append(errs, fmt.Errorf("spec.%s: %v != %v", name, a, b))
		}
	}
	for k, pq := range preset.Resources.Requests {
		if vq, ok := vmi.Resources.Requests[k]; ok && pq.Cmp(vq) != 0 {
			errs = append(errs, fmt.Errorf("spec.resources.requests[%s]: %v != %v", k, pq.String(), vq.String()))
		}
	}
	if preset.CPU != nil && vmi.CPU != nil {
		differ("cpu", preset.CPU, vmi.CPU)
	}
	if preset.Firmware != nil && vmi.Firmware != nil {
		differ("firmware", preset.Firmware, vmi.Firmware)
	}
	if preset.Clock != nil && vmi.Clock != nil {
		differ("clock.clockoffset", preset.Clock.ClockOffset, vmi.Clock.ClockOffset)
		if preset.Clock.Timer != nil && vmi.Clock.Timer != nil {
			differ("clock.timer", preset.Clock.Timer, vmi.Clock.Timer)
		}
	}
	if preset.Features != nil && vmi.Features != nil {
		differ("features", preset.Features, vmi.Features)
	}
	if preset.Devices.Watchdog != nil && vmi.Devices.Watchdog != nil {
		differ("devices.watchdog", preset.Devices.Watchdog, vmi.Devices.Watchdog)
	}
	if preset.IOThreadsPolicy != nil && vmi.IOThreadsPolicy != nil {
		differ("ioThreadsPolicy", preset.IOThreadsPolicy, vmi.IOThreadsPolicy)
	}
	return errs
}

// mergeDomain fills what the VMI leaves unset from the preset and reports whether any preset
// field now holds in the VMI.
func mergeDomain(preset, vmi *kubevirtv1.DomainSpec) bool {
	applied := false
	if len(preset.Resources.Requests) > 0 {
		// Requests are taken only as a whole, into a VMI that requests nothing.
		if vmi.Resources.Requests == nil {
			vmi.Resources.Requests = preset.Resources.Requests.DeepCopy()
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.Resources.Requests, preset.Resources.Requests)
	}
	if preset.CPU != nil {
		if vmi.CPU == nil {
			vmi.CPU = preset.CPU.DeepCopy()
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.CPU, preset.CPU)
	}
	if preset.Firmware != nil {
		if vmi.Firmware == nil {
			vmi.Firmware = preset.Firmware.DeepCopy()
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.Firmware, preset.Firmware)
	}
	if preset.Clock != nil {
		if vmi.Clock == nil {
			vmi.Clock = &kubevirtv1.Clock{ClockOffset: *preset.Clock.ClockOffset.DeepCopy()}
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.Clock, preset.Clock)
		if preset.Clock.Timer != nil {
			if vmi.Clock.Timer == nil {
				vmi.Clock.Timer = preset.Clock.Timer.DeepCopy()
			}
			applied = applied || equality.Semantic.DeepEqual(vmi.Clock.Timer, preset.Clock.Timer)
		}
	}
	if preset.Features != nil {
		if vmi.Features == nil {
			vmi.Features = preset.Features.DeepCopy()
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.Features, preset.Features)
	}
	if preset.Devices.Watchdog != nil {
		if vmi.Devices.Watchdog == nil {
			vmi.Devices.Watchdog = preset.Devices.Watchdog.DeepCopy()
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.Devices.Watchdog, preset.Devices.Watchdog)
	}
	if preset.IOThreadsPolicy != nil {
		if vmi.IOThreadsPolicy == nil {
			p := *preset.IOThreadsPolicy
			vmi.IOThreadsPolicy = &p
		}
		applied = applied || equality.Semantic.DeepEqual(vmi.IOThreadsPolicy, preset.IOThreadsPolicy)
	}
	return applied
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// vmiPatch replaces what the mutator may have changed. "add" replaces an existing member and
// creates a missing one, so it works whether or not the client sent annotations or a status.
func vmiPatch(before, after *kubevirtv1.VirtualMachineInstance) []patchOp {
	var ops []patchOp
	if !equality.Semantic.DeepEqual(before.Spec, after.Spec) {
		ops = append(ops, patchOp{Op: "add", Path: "/spec", Value: after.Spec})
	}
	if !equality.Semantic.DeepEqual(before.Annotations, after.Annotations) {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: after.Annotations})
	}
	if !equality.Semantic.DeepEqual(before.Finalizers, after.Finalizers) {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/finalizers", Value: after.Finalizers})
	}
	if !equality.Semantic.DeepEqual(before.Status, after.Status) {
		ops = append(ops, patchOp{Op: "add", Path: "/status", Value: after.Status})
	}
	return ops
}

func (s *Server) mutateVMI(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create {
		return allow()
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := decodeObject(req.Object.Raw, &vmi); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	before := vmi.DeepCopy()
	ns := vmi.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	var presets kubevirtv1.VirtualMachineInstancePresetList
	if err := s.Reader.List(ctx, &presets, client.InNamespace(ns)); err != nil {
		return failed(http.StatusInternalServerError, fmt.Errorf("list presets in %s: %w", ns, err))
	}
	res, err := ApplyPresets(&vmi, presets.Items)
	if err != nil {
		// KubeVirt answers a preset conflict with a bare 422 carrying the error text.
		return failed(http.StatusUnprocessableEntity, err)
	}
	for name, why := range res.Skipped {
		s.Log.Warn("preset not applied", "namespace", ns, "vmi", vmi.Name, "preset", name, "conflicts", why)
	}
	DefaultVMI(&vmi)
	return patched(vmiPatch(before, &vmi))
}

func (s *Server) mutateVM(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var vm kubevirtv1.VirtualMachine
	if err := decodeObject(req.Object.Raw, &vm); err != nil {
		return failed(http.StatusBadRequest, err)
	}
	if vm.DeletionTimestamp != nil {
		return allow()
	}
	before := vm.DeepCopy()
	DefaultVM(&vm)
	var ops []patchOp
	if !equality.Semantic.DeepEqual(before.Spec, vm.Spec) {
		ops = append(ops, patchOp{Op: "add", Path: "/spec", Value: vm.Spec})
	}
	// The VM controller's finalizer comes with the VM instead of in a write of its own after it
	// (the controller still adds it to a VM that came without).
	if req.Operation == admissionv1.Create && !containsString(vm.Finalizers, kubevirtv1.VirtualMachineControllerFinalizer) {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/finalizers", Value: append(vm.Finalizers, kubevirtv1.VirtualMachineControllerFinalizer)})
	}
	if len(ops) == 0 {
		return allow()
	}
	return patched(ops)
}
