package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
)

// TemplateHashAnnotation is put on every VMI the controller creates: the hash of the part of the
// template the VMI was made from that only a restart can change (restartKey). It is a hash on the
// VMI rather than a ControllerRevision as KubeVirt keeps, because nothing here needs the old
// template back, only whether it differs: no extra object to create, look up, clean up or
// authorise. The VMI's own spec cannot serve, as the webhooks default it.
const TemplateHashAnnotation = "kubevirt.io/vm-template-hash"

// restartRequiredMessage is KubeVirt's, word for word: clients show it.
const restartRequiredMessage = "a non-live-updatable field was changed in the template spec"

// restartKey is the template spec without what a running VMI takes live: the hotpluggable
// volumes and their disks, which volume hotplug adds to and removes from template and VMI alike.
func restartKey(spec *kubevirtv1.VirtualMachineInstanceSpec) *kubevirtv1.VirtualMachineInstanceSpec {
	key := spec.DeepCopy()
	plugged := map[string]bool{}
	var volumes []kubevirtv1.Volume
	for i := range key.Volumes {
		if hotplug.Pluggable(&key.Volumes[i]) {
			plugged[key.Volumes[i].Name] = true
			continue
		}
		volumes = append(volumes, key.Volumes[i])
	}
	var disks []kubevirtv1.Disk
	for _, d := range key.Domain.Devices.Disks {
		if !plugged[d.Name] {
			disks = append(disks, d)
		}
	}
	key.Volumes, key.Domain.Devices.Disks = volumes, disks
	return key
}

// TemplateHash is the value of TemplateHashAnnotation for a template.
func TemplateHash(tmpl *kubevirtv1.VirtualMachineInstanceTemplateSpec) string {
	var spec kubevirtv1.VirtualMachineInstanceSpec
	if tmpl != nil {
		spec = tmpl.Spec
	}
	// A spec always marshals: it is plain data decoded from JSON.
	b, _ := json.Marshal(restartKey(&spec))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// restartRequired reports whether the VM's template differs from the one its VMI was made from in
// a way the VMI cannot take live. A VMI without the annotation (made before it existed) gives no
// verdict; without a VMI there is nothing to restart.
func restartRequired(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vmi == nil || vm.Spec.Template == nil {
		return false
	}
	made, ok := vmi.Annotations[TemplateHashAnnotation]
	return ok && made != TemplateHash(vm.Spec.Template)
}

// restartRequiredCondition is the RestartRequired condition as KubeVirt sets it (no reason).
func restartRequiredCondition() kubevirtv1.VirtualMachineCondition {
	return kubevirtv1.VirtualMachineCondition{
		Type: kubevirtv1.VirtualMachineRestartRequired, Status: corev1.ConditionTrue, Message: restartRequiredMessage,
	}
}
