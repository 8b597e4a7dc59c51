package vm

import (
	"context"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
)

// VolumeChanges is what the VM's pending volume requests (status.volumeRequests, queued by
// virt-api's addvolume and removevolume) change: the template's spec and the spec of the VMI that
// runs it, each nil when it stays as it is.
type VolumeChanges struct {
	Template *kubevirtv1.VirtualMachineInstanceSpec
	VMI      *kubevirtv1.VirtualMachineInstanceSpec
}

// ApplyVolumeRequests applies every pending request, in order, to copies of the template and of
// the live VMI's spec (a VMI that is ending or gone gets none: the next one starts from the
// template). Applying is idempotent, so requests already carried out by an earlier reconcile
// whose status write was lost change nothing.
func ApplyVolumeRequests(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) VolumeChanges {
	var out VolumeChanges
	if len(vm.Status.VolumeRequests) == 0 || vm.Spec.Template == nil {
		return out
	}
	tmpl := vm.Spec.Template.Spec.DeepCopy()
	var live *kubevirtv1.VirtualMachineInstanceSpec
	if vmi != nil && !finished(vmi) && !deleting(vmi) {
		live = vmi.Spec.DeepCopy()
	}
	tmplChanged, liveChanged := false, false
	for i := range vm.Status.VolumeRequests {
		req := &vm.Status.VolumeRequests[i]
		tmplChanged = hotplug.Apply(tmpl, req) || tmplChanged
		if live != nil {
			liveChanged = hotplug.Apply(live, req) || liveChanged
		}
	}
	if tmplChanged {
		out.Template = tmpl
	}
	if liveChanged {
		out.VMI = live
	}
	return out
}

// applyVolumeRequests writes the changes of the pending volume requests: the template first, so
// that a VMI made from it meanwhile has the volumes too, then the running VMI. Both writes carry
// the objects' resourceVersions; a conflict retries the reconcile. It reports whether there were
// requests, which the status write then drops.
func (r *Reconciler) applyVolumeRequests(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (bool, error) {
	if len(vm.Status.VolumeRequests) == 0 || vm.DeletionTimestamp != nil {
		return false, nil
	}
	ch := ApplyVolumeRequests(vm, vmi)
	if ch.Template != nil {
		status := vm.Status.DeepCopy()
		patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		vm.Spec.Template.Spec = *ch.Template
		if err := r.Client.Patch(ctx, vm, patch); err != nil {
			return false, fmt.Errorf("apply volume requests to the VM template: %w", err)
		}
		// Patch returns the stored object; the status is the one this reconcile works on.
		vm.Status = *status
		log.FromContext(ctx).Info("applied volume requests to the template", "requests", len(vm.Status.VolumeRequests))
	}
	if ch.VMI != nil {
		patch := client.MergeFromWithOptions(vmi.DeepCopy(), client.MergeFromWithOptimisticLock{})
		vmi.Spec = *ch.VMI
		if err := r.Client.Patch(ctx, vmi, patch); err != nil {
			return false, fmt.Errorf("apply volume requests to the VMI: %w", err)
		}
		log.FromContext(ctx).Info("applied volume requests to the running VMI")
	}
	return true, nil
}
