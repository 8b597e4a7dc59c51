package vm

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Annotations and labels KubeVirt puts on a VMI it creates for a VM.
const (
	// GenerationAnnotation records the VM generation the VMI was made from, so that changes that
	// need a restart can be detected.
	GenerationAnnotation = "kubevirt.io/vm-generation"
	// CreatedByLabel names the VM that owns the VMI.
	CreatedByLabel = "kubevirt.io/created-by"
)

// NewVMI builds the VMI of a VM from its template: same name and namespace, owned by the VM and
// guarded by the controller's finalizer until virt-controller has cleaned up after it.
func NewVMI(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstance {
	tmpl := vm.Spec.Template
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if tmpl != nil {
		vmi.ObjectMeta = *tmpl.ObjectMeta.DeepCopy()
		vmi.Spec = *tmpl.Spec.DeepCopy()
	}
	vmi.Name = vm.Name
	vmi.Namespace = vm.Namespace
	vmi.GenerateName = ""
	vmi.ResourceVersion = ""
	vmi.UID = ""
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	vmi.Labels[CreatedByLabel] = string(vm.UID)
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	vmi.Annotations[GenerationAnnotation] = strconv.FormatInt(vm.Generation, 10)
	vmi.Annotations[TemplateHashAnnotation] = TemplateHash(tmpl)
	vmi.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)}
	vmi.Finalizers = append(vmi.Finalizers, kubevirtv1.VirtualMachineControllerFinalizer)
	// The VMI controller's first step would be this very status (its Pod is yet to be made):
	// created with it, the VMI needs no write for it.
	vmi.Status = kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Pending}
	return vmi
}
