package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// Keys the controller puts on the internal VM and its template.
const (
	// AnnotationAppliedSpec on the template (so also on the VMI the core makes from it) is the
	// friendly spec the template was built from, as JSON (AppliedSpec): the running guest's
	// configuration, that changes awaiting a restart are measured against.
	AnnotationAppliedSpec = "virtualization.deckhouse.io/applied-spec"
	// AnnotationAppliedClass on the template (and the VMI) is what of the class the template was
	// built from, as JSON (MarshalAppliedClass): a class changed since then awaits a restart.
	AnnotationAppliedClass = "virtualization.deckhouse.io/applied-class"
	// AnnotationSpecHash on the internal VM is the hash of the spec Build made: the core's webhooks
	// default the stored spec, so the controller compares what it would build with what it built.
	AnnotationSpecHash = "virtualization.deckhouse.io/spec-hash"
	// AnnotationIPAddress on the template asks the pod network for the VM's address (the key the
	// reference module's CNI honours); the core copies template annotations to the launcher Pod.
	AnnotationIPAddress = "cni.cilium.io/ipAddress"
	// LabelVirtualMachineName on the internal VM and its template names the friendly VM.
	LabelVirtualMachineName = "virtualization.deckhouse.io/virtual-machine-name"
)

// Names of the internal VM's network, interface and cloud-init volume.
const (
	networkName   = "default"
	cloudInitName = "cloudinit"
)

// Device is one of the friendly VM's block devices as the internal VM attaches it: resolved from
// its VirtualDisk, VirtualImage or ClusterVirtualImage by ResolveDevice.
type Device struct {
	Ref v1alpha2.BlockDeviceSpecRef
	// Ready: the object exists and its data can be attached; Reason says why not.
	Ready  bool
	Reason string
	// ClaimName is the PersistentVolumeClaim that holds the data, or Image the container disk in
	// DVCR; exactly one is set on a ready device.
	ClaimName string
	Image     string
	// ReadOnly: an image (never written by the guest); CDROM: an ISO image.
	ReadOnly bool
	CDROM    bool
	// Size is the device's size as status shows it.
	Size string
}

// Inputs are everything the internal VM is built from.
type Inputs struct {
	VM    *v1alpha2.VirtualMachine
	Class *v1alpha3.VirtualMachineClass
	// Devices are the resolved spec.blockDeviceRefs, in their order; all Ready.
	Devices []Device
	// IPAddress is the address of the VM's VirtualMachineIPAddress, empty when it has none.
	IPAddress string
}

// Build is the internal KubeVirt VM of a friendly VM: same name and namespace, owned by it, run
// strategy Manual (the controller enforces the run policy), the template from the spec, the class
// and the devices.
func Build(in Inputs) (*kubevirtv1.VirtualMachine, error) {
	vm := in.VM
	domain, err := buildDomain(in)
	if err != nil {
		return nil, err
	}
	applied, err := MarshalAppliedSpec(&vm.Spec)
	if err != nil {
		return nil, err
	}
	appliedClass, err := MarshalAppliedClass(in.Class)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{AnnotationAppliedSpec: applied, AnnotationAppliedClass: appliedClass}
	if in.IPAddress != "" {
		annotations[AnnotationIPAddress] = in.IPAddress
	}
	labels := map[string]string{LabelVirtualMachineName: vm.Name}
	volumes := buildVolumes(in)
	manual := kubevirtv1.RunStrategyManual
	out := &kubevirtv1.VirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace, Labels: maps.Clone(labels),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1alpha2.SchemeGroupVersion.WithKind("VirtualMachine"))},
		},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &manual,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain:                        domain,
					Networks:                      []kubevirtv1.Network{{Name: networkName, NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
					Volumes:                       volumes,
					NodeSelector:                  nodeSelector(vm, in.Class),
					Tolerations:                   tolerations(vm, in.Class),
					Affinity:                      affinity(vm, in.Class),
					TopologySpreadConstraints:     vm.Spec.TopologySpreadConstraints,
					PriorityClassName:             vm.Spec.PriorityClassName,
					TerminationGracePeriodSeconds: vm.Spec.TerminationGracePeriodSeconds,
				},
			},
		},
	}
	hash, err := specHash(&out.Spec)
	if err != nil {
		return nil, err
	}
	out.Annotations = map[string]string{AnnotationSpecHash: hash}
	return out, nil
}

func specHash(spec *kubevirtv1.VirtualMachineSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("marshal the internal VM's spec: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

func buildDomain(in Inputs) (kubevirtv1.DomainSpec, error) {
	vm := in.VM
	cores := vm.Spec.CPU.Cores
	if cores < 1 {
		return kubevirtv1.DomainSpec{}, fmt.Errorf("spec.cpu.cores %d: must be at least 1", cores)
	}
	fraction, err := ParseCoreFraction(EffectiveCoreFraction(vm, in.Class))
	if err != nil {
		return kubevirtv1.DomainSpec{}, err
	}
	topo := TopologyOf(cores)
	limit := resource.NewQuantity(int64(cores), resource.DecimalSI)
	request := resource.NewMilliQuantity(int64(cores)*int64(fraction)*10, resource.DecimalSI)
	mem := vm.Spec.Memory.Size.DeepCopy()
	paravirt := vm.Spec.EnableParavirtualization == nil || *vm.Spec.EnableParavirtualization
	d := kubevirtv1.DomainSpec{
		CPU: &kubevirtv1.CPU{
			Cores: uint32(topo.CoresPerSocket), Sockets: uint32(topo.Sockets), Threads: 1,
		},
		Memory: &kubevirtv1.Memory{Guest: &mem},
		Resources: kubevirtv1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: *request, corev1.ResourceMemory: mem},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: *limit, corev1.ResourceMemory: mem},
		},
		Devices: kubevirtv1.Devices{
			Disks:      buildDisks(in, paravirt),
			Interfaces: []kubevirtv1.Interface{netInterface(paravirt)},
		},
		Firmware: firmware(vm.Spec.Bootloader),
	}
	if in.Class != nil {
		d.CPU.Model, d.CPU.Features = cpuModel(in.Class)
	}
	return d, nil
}

func netInterface(paravirt bool) kubevirtv1.Interface {
	iface := kubevirtv1.Interface{Name: networkName, InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}}
	if !paravirt {
		iface.Model = "e1000"
	}
	return iface
}

func firmware(b v1alpha2.BootloaderType) *kubevirtv1.Firmware {
	switch b {
	case v1alpha2.EFI:
		off := false
		return &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: &off}}}
	case v1alpha2.EFIWithSecureBoot:
		on := true
		return &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: &on}}}
	default:
		return nil
	}
}

// cpuModel is the class's processor in KubeVirt's terms: Host and HostPassthrough are libvirt's
// modes, Model a named model (with the features on top), Discovery and Features the baseline
// model kvm64 with the class's features required.
func cpuModel(class *v1alpha3.VirtualMachineClass) (string, []kubevirtv1.CPUFeature) {
	c := class.Spec.CPU
	switch c.Type {
	case v1alpha2.CPUTypeHost:
		return kubevirtv1.CPUModeHostModel, nil
	case v1alpha2.CPUTypeHostPassthrough:
		return kubevirtv1.CPUModeHostPassthrough, nil
	case v1alpha2.CPUTypeModel:
		return c.Model, requireFeatures(c.Features)
	case v1alpha2.CPUTypeFeatures:
		return "kvm64", requireFeatures(c.Features)
	case v1alpha2.CPUTypeDiscovery:
		return "kvm64", requireFeatures(class.Status.CPUFeatures.Enabled)
	}
	return "", nil
}

func requireFeatures(names []string) []kubevirtv1.CPUFeature {
	var out []kubevirtv1.CPUFeature
	for _, n := range names {
		out = append(out, kubevirtv1.CPUFeature{Name: n, Policy: "require"})
	}
	return out
}

// bootOrders numbers the devices: an explicit bootOrder first by its value, then the others in
// list order.
func bootOrders(devs []Device) []uint {
	type item struct{ i, explicit int }
	items := make([]item, len(devs))
	for i, d := range devs {
		e := int(^uint(0) >> 1)
		if d.Ref.BootOrder != nil {
			e = *d.Ref.BootOrder
		}
		items[i] = item{i, e}
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].explicit < items[b].explicit })
	orders := make([]uint, len(devs))
	for n, it := range items {
		orders[it.i] = uint(n + 1)
	}
	return orders
}

// VolumeName is the internal VM's name of a block device's disk and volume: vd-, vi- or cvi-
// and the object's name.
func VolumeName(ref v1alpha2.BlockDeviceSpecRef) string {
	prefix := map[v1alpha2.BlockDeviceKind]string{
		KindVirtualDisk: "vd", KindVirtualImage: "vi", KindClusterVirtualImage: "cvi",
	}[ref.Kind]
	return prefix + "-" + ref.Name
}

func buildDisks(in Inputs, paravirt bool) []kubevirtv1.Disk {
	bus := kubevirtv1.DiskBusVirtio
	if !paravirt {
		bus = kubevirtv1.DiskBusSATA
	}
	orders := bootOrders(in.Devices)
	var disks []kubevirtv1.Disk
	for i, d := range in.Devices {
		order := orders[i]
		disk := kubevirtv1.Disk{Name: VolumeName(d.Ref), BootOrder: &order}
		if d.CDROM {
			disk.CDRom = &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA}
		} else {
			// A read-only claim (an image kept on one) is a read-only disk; a container disk is
			// read-only below the launcher's overlay, which the guest writes.
			disk.Disk = &kubevirtv1.DiskTarget{Bus: bus, ReadOnly: d.ReadOnly && d.ClaimName != ""}
		}
		disks = append(disks, disk)
	}
	if p := in.VM.Spec.Provisioning; p != nil {
		disks = append(disks, kubevirtv1.Disk{Name: cloudInitName, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: bus}}})
	}
	return disks
}

func buildVolumes(in Inputs) []kubevirtv1.Volume {
	var vols []kubevirtv1.Volume
	for _, d := range in.Devices {
		v := kubevirtv1.Volume{Name: VolumeName(d.Ref)}
		if d.Image != "" {
			v.ContainerDisk = &kubevirtv1.ContainerDiskSource{Image: d.Image, ImagePullPolicy: corev1.PullIfNotPresent}
		} else {
			v.PersistentVolumeClaim = &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.ClaimName, ReadOnly: d.ReadOnly},
			}
		}
		vols = append(vols, v)
	}
	if p := in.VM.Spec.Provisioning; p != nil {
		src := &kubevirtv1.CloudInitNoCloudSource{}
		switch p.Type {
		case v1alpha2.ProvisioningTypeUserData:
			src.UserData = p.UserData
		case v1alpha2.ProvisioningTypeUserDataRef:
			src.UserDataSecretRef = &corev1.LocalObjectReference{Name: p.UserDataRef.Name}
		}
		vols = append(vols, kubevirtv1.Volume{Name: cloudInitName, VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: src}})
	}
	return vols
}

// nodeSelector is the VM's node selector over the class's matchLabels (the VM's win).
func nodeSelector(vm *v1alpha2.VirtualMachine, class *v1alpha3.VirtualMachineClass) map[string]string {
	out := map[string]string{}
	if class != nil {
		maps.Copy(out, class.Spec.NodeSelector.MatchLabels)
	}
	maps.Copy(out, vm.Spec.NodeSelector)
	if len(out) == 0 {
		return nil
	}
	return out
}

// tolerations are the class's, then the VM's that the class does not have already.
func tolerations(vm *v1alpha2.VirtualMachine, class *v1alpha3.VirtualMachineClass) []corev1.Toleration {
	var out []corev1.Toleration
	if class != nil {
		out = append(out, class.Spec.Tolerations...)
	}
	for _, t := range vm.Spec.Tolerations {
		dup := false
		for _, have := range out {
			if have.MatchToleration(&t) && have.Value == t.Value && ptrEqual(have.TolerationSeconds, t.TolerationSeconds) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

func ptrEqual(a, b *int64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// affinity is the VM's affinity in Pod terms, with the class's matchExpressions added to every
// required node selector term (a node must meet the class's and one of the VM's terms).
func affinity(vm *v1alpha2.VirtualMachine, class *v1alpha3.VirtualMachineClass) *corev1.Affinity {
	var classExprs []corev1.NodeSelectorRequirement
	if class != nil {
		classExprs = class.Spec.NodeSelector.MatchExpressions
	}
	a := vm.Spec.Affinity
	if a == nil && len(classExprs) == 0 {
		return nil
	}
	out := &corev1.Affinity{}
	if a != nil {
		out.NodeAffinity = a.NodeAffinity.DeepCopy()
		out.PodAffinity = a.VirtualMachineAndPodAffinity.DeepCopy()
		out.PodAntiAffinity = a.VirtualMachineAndPodAntiAffinity.DeepCopy()
	}
	if len(classExprs) > 0 {
		if out.NodeAffinity == nil {
			out.NodeAffinity = &corev1.NodeAffinity{}
		}
		req := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if req == nil || len(req.NodeSelectorTerms) == 0 {
			req = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
		}
		for i := range req.NodeSelectorTerms {
			req.NodeSelectorTerms[i].MatchExpressions = append(req.NodeSelectorTerms[i].MatchExpressions, classExprs...)
		}
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
	}
	return out
}

// EffectiveCoreFraction is the VM's coreFraction, else the default of the class's sizing policy
// for its cores, else 100%.
func EffectiveCoreFraction(vm *v1alpha2.VirtualMachine, class *v1alpha3.VirtualMachineClass) string {
	if vm.Spec.CPU.CoreFraction != "" {
		return vm.Spec.CPU.CoreFraction
	}
	if class != nil {
		for _, p := range class.Spec.SizingPolicies {
			if p.Cores != nil && vm.Spec.CPU.Cores >= p.Cores.Min && vm.Spec.CPU.Cores <= p.Cores.Max && p.DefaultCoreFraction != nil {
				return string(*p.DefaultCoreFraction)
			}
		}
	}
	return "100%"
}

// ParseCoreFraction reads "5%" as 5; 1 to 100.
func ParseCoreFraction(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || !strings.HasSuffix(s, "%") || n < 1 || n > 100 {
		return 0, fmt.Errorf("spec.cpu.coreFraction %q: want a percentage from 1%% to 100%%", s)
	}
	return n, nil
}

// TopologyOf lays cores out in sockets as the reference module does: one socket up to 16 cores,
// then 2, 4 and 8 sockets of up to 16, 32 and 64... cores, each socket with the same count.
func TopologyOf(cores int) v1alpha2.Topology {
	sockets := 1
	switch {
	case cores > 64:
		sockets = 8
	case cores > 32:
		sockets = 4
	case cores > 16:
		sockets = 2
	}
	for sockets > 1 && cores%sockets != 0 {
		sockets /= 2
	}
	return v1alpha2.Topology{Sockets: sockets, CoresPerSocket: cores / sockets}
}
