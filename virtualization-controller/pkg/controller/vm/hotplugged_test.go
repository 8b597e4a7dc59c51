package vm

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// TestBlockDeviceStatusHotplugged: a disk an attachment plugged into the VMI is reported after
// the spec's devices with hotplugged and the attachment's name; one the VMI lacks, or one also in
// the spec, is not.
func TestBlockDeviceStatusHotplugged(t *testing.T) {
	attach := func(name, disk string) v1alpha2.VirtualMachineBlockDeviceAttachment {
		return v1alpha2.VirtualMachineBlockDeviceAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha2.VirtualMachineBlockDeviceAttachmentSpec{VirtualMachineName: "web",
				BlockDeviceRef: v1alpha2.VMBDAObjectRef{Kind: v1alpha2.VMBDAObjectRefKindVirtualDisk, Name: disk}}}
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Spec.Volumes = []kubevirtv1.Volume{{Name: "vd-root"}, {Name: "vd-data"}, {Name: "vd-plugging"}}
	vmi.Status.VolumeStatus = []kubevirtv1.VolumeStatus{
		{Name: "vd-data", Phase: kubevirtv1.VolumeReady, PersistentVolumeClaimInfo: &kubevirtv1.PersistentVolumeClaimInfo{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")}}},
		{Name: "vd-plugging", Phase: kubevirtv1.HotplugVolumeAttachedToNode},
	}
	in := &StatusInputs{
		Devices: []Device{{Ref: v1alpha2.BlockDeviceSpecRef{Kind: KindVirtualDisk, Name: "root"}, Size: "1Gi"}},
		VMI:     vmi,
		Attachments: []v1alpha2.VirtualMachineBlockDeviceAttachment{
			attach("data", "data"), attach("plugging", "plugging"), attach("not-yet", "later"), attach("root-again", "root"),
		},
	}
	want := []v1alpha2.BlockDeviceStatusRef{
		{Kind: KindVirtualDisk, Name: "root", Size: "1Gi", Target: "vd-root", Attached: true},
		{Kind: KindVirtualDisk, Name: "data", Size: "100Mi", Target: "vd-data", Attached: true, Hotplugged: true, VirtualMachineBlockDeviceAttachmentName: "data"},
		{Kind: KindVirtualDisk, Name: "plugging", Target: "vd-plugging", Hotplugged: true, VirtualMachineBlockDeviceAttachmentName: "plugging"},
	}
	if got := blockDeviceStatus(in); !reflect.DeepEqual(got, want) {
		t.Errorf("blockDeviceStatus =\n%+v\nwant\n%+v", got, want)
	}
}
