package vm

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestApplyVolumeRequests(t *testing.T) {
	add := kubevirtv1.VirtualMachineVolumeRequest{AddVolumeOptions: &kubevirtv1.AddVolumeOptions{Name: "hot", Disk: &kubevirtv1.Disk{Name: "hot"},
		VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}}
	remove := kubevirtv1.VirtualMachineVolumeRequest{RemoveVolumeOptions: &kubevirtv1.RemoveVolumeOptions{Name: "hot"}}
	vmWith := func(reqs ...kubevirtv1.VirtualMachineVolumeRequest) *kubevirtv1.VirtualMachine {
		vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
		vm.Status.VolumeRequests = reqs
		return vm
	}
	running := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	failed := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Failed}}
	deleted := running.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name                string
		vm                  *kubevirtv1.VirtualMachine
		vmi                 *kubevirtv1.VirtualMachineInstance
		wantTmpl, wantVMI   bool
		wantVolumesInTmpl   int
		wantVolumesInRunner int
	}{
		{name: "no requests", vm: vmWith(), vmi: running},
		{name: "add to a stopped VM", vm: vmWith(add), wantTmpl: true, wantVolumesInTmpl: 1},
		{name: "add to a running VM", vm: vmWith(add), vmi: running, wantTmpl: true, wantVMI: true, wantVolumesInTmpl: 1, wantVolumesInRunner: 1},
		{name: "a finished VMI is left alone", vm: vmWith(add), vmi: failed, wantTmpl: true, wantVolumesInTmpl: 1},
		{name: "a deleted VMI is left alone", vm: vmWith(add), vmi: deleted, wantTmpl: true, wantVolumesInTmpl: 1},
		{name: "add then remove cancel out", vm: vmWith(add, remove), vmi: running, wantTmpl: true, wantVMI: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := ApplyVolumeRequests(tc.vm, tc.vmi)
			if (ch.Template != nil) != tc.wantTmpl || (ch.VMI != nil) != tc.wantVMI {
				t.Fatalf("changes: template %v, VMI %v; want %v, %v", ch.Template != nil, ch.VMI != nil, tc.wantTmpl, tc.wantVMI)
			}
			if ch.Template != nil && len(ch.Template.Volumes) != tc.wantVolumesInTmpl {
				t.Errorf("template volumes %+v", ch.Template.Volumes)
			}
			if ch.VMI != nil && len(ch.VMI.Volumes) != tc.wantVolumesInRunner {
				t.Errorf("VMI volumes %+v", ch.VMI.Volumes)
			}
			if ch.Template != nil && len(ch.Template.Volumes) == 1 && !ch.Template.Volumes[0].PersistentVolumeClaim.Hotpluggable {
				t.Error("the added volume is not hotpluggable")
			}
		})
	}
}
