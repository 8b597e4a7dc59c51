package vd

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importerresult"
)

func TestDecide(t *testing.T) {
	now := metav1.NewTime(time.Unix(1, 0))
	vd := func(mut func(*v1alpha2.VirtualDisk)) *v1alpha2.VirtualDisk {
		d := disk(httpSource, "1Gi", "")
		d.Finalizers = []string{Finalizer}
		if mut != nil {
			mut(d)
		}
		return d
	}
	deleting := func(d *v1alpha2.VirtualDisk) { d.DeletionTimestamp = &now }
	phase := func(p v1alpha2.DiskPhase, gen int64) func(*v1alpha2.VirtualDisk) {
		return func(d *v1alpha2.VirtualDisk) {
			d.Status.Phase, d.Status.ObservedGeneration = p, gen
			d.Status.Target.PersistentVolumeClaimName = ClaimName(d)
		}
	}
	owned := metav1.ObjectMeta{OwnerReferences: owner(disk(nil, "", ""))}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: owned}
	provisioned := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned.OwnerReferences, Annotations: map[string]string{AnnotationProvisioned: "true"}}}
	going := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned.OwnerReferences, DeletionTimestamp: &now}}
	running := &corev1.Pod{ObjectMeta: owned, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	ended := &corev1.Pod{ObjectMeta: owned, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: importerresult.Container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}}}
	stranger := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: "older"}}}}
	cases := []struct {
		name  string
		state State
		want  Step
	}{
		{"new disk", State{VD: vd(func(d *v1alpha2.VirtualDisk) { d.Finalizers = nil })}, StepAddFinalizer},
		{"deleted while a VM uses it", State{VD: vd(deleting), PVC: provisioned, InUse: true}, StepWaitUnused},
		{"deleted, unused", State{VD: vd(deleting), PVC: provisioned}, StepCleanup},
		{"deleted, finalizer gone", State{VD: vd(func(d *v1alpha2.VirtualDisk) { deleting(d); d.Finalizers = nil })}, StepNone},
		{"an older disk's importer", State{VD: vd(nil), Pod: stranger}, StepDeleteImporter},
		{"no claim yet", State{VD: vd(nil)}, StepProvision},
		{"pending, no claim", State{VD: vd(phase(v1alpha2.DiskPending, 1))}, StepProvision},
		{"failed, claim gone", State{VD: vd(phase(v1alpha2.DiskFailed, 1))}, StepNone},
		{"failed, importer left", State{VD: vd(phase(v1alpha2.DiskFailed, 1)), Pod: ended}, StepDeleteImporter},
		{"failed, grown since: again", State{VD: vd(func(d *v1alpha2.VirtualDisk) { phase(v1alpha2.DiskFailed, 1)(d); d.Generation = 2 })}, StepProvision},
		{"failed, half-written claim", State{VD: vd(phase(v1alpha2.DiskFailed, 1)), PVC: claim}, StepDeleteClaim},
		{"failed, claim going", State{VD: vd(phase(v1alpha2.DiskFailed, 1)), PVC: going}, StepNone},
		{"claim waits to be filled", State{VD: vd(phase(v1alpha2.DiskProvisioning, 1)), PVC: claim}, StepCreatePod},
		{"importing", State{VD: vd(phase(v1alpha2.DiskProvisioning, 1)), PVC: claim, Pod: running}, StepWatchProgress},
		{"importer ended", State{VD: vd(phase(v1alpha2.DiskProvisioning, 1)), PVC: claim, Pod: ended}, StepRecordResult},
		{"imported, importer left", State{VD: vd(phase(v1alpha2.DiskReady, 1)), PVC: provisioned, Pod: ended}, StepDeleteImporter},
		{"ready", State{VD: vd(phase(v1alpha2.DiskReady, 1)), PVC: provisioned}, StepObserve},
		{"grown", State{VD: vd(func(d *v1alpha2.VirtualDisk) { phase(v1alpha2.DiskReady, 1)(d); d.Generation = 2 }), PVC: provisioned}, StepObserve},
		{"ready, claim gone", State{VD: vd(phase(v1alpha2.DiskReady, 1))}, StepLost},
		{"resizing, claim gone", State{VD: vd(phase(v1alpha2.DiskResizing, 1))}, StepLost},
		{"lost", State{VD: vd(phase(v1alpha2.DiskLost, 1))}, StepLost},
		// A disk without a size: its inspector learns the source's size before the claim.
		{"inspecting", State{VD: vd(phase(v1alpha2.DiskProvisioning, 1)), Inspector: running}, StepWatchInspection},
		{"inspector ended", State{VD: vd(phase(v1alpha2.DiskProvisioning, 1)), Inspector: ended}, StepRecordSize},
		{"size recorded, inspector left", State{VD: vd(func(d *v1alpha2.VirtualDisk) { d.Annotations = map[string]string{AnnotationSourceSize: "1"} }), Inspector: ended}, StepDeleteInspector},
		{"claim made, inspector left", State{VD: vd(phase(v1alpha2.DiskProvisioning, 1)), PVC: claim, Inspector: ended}, StepDeleteInspector},
		{"failed, inspector left", State{VD: vd(phase(v1alpha2.DiskFailed, 1)), Inspector: ended}, StepDeleteInspector},
		{"an older disk's inspector", State{VD: vd(nil), Inspector: stranger}, StepDeleteInspector},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.state); got != tc.want {
				t.Errorf("Decide = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestConsumers(t *testing.T) {
	d := disk(nil, "1Gi", "")
	d.Status.AttachedToVirtualMachines = []v1alpha2.AttachedVirtualMachine{{Name: "vm1"}}
	uses := func(name string, phase corev1.PodPhase, claim string, refs ...metav1.OwnerReference) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: refs}, Status: corev1.PodStatus{Phase: phase},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	}
	pods := []corev1.Pod{
		uses("virt-launcher-a", corev1.PodRunning, ClaimName(d)),
		uses("virt-launcher-old", corev1.PodSucceeded, ClaimName(d)),
		uses("other", corev1.PodRunning, "other-claim"),
		uses("vd-importer-tiny", corev1.PodRunning, ClaimName(d), owner(d)...),
	}
	attachment := func(name, disk string, phase v1alpha2.BlockDeviceAttachmentPhase) v1alpha2.VirtualMachineBlockDeviceAttachment {
		return v1alpha2.VirtualMachineBlockDeviceAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   v1alpha2.VirtualMachineBlockDeviceAttachmentSpec{VirtualMachineName: "vm2", BlockDeviceRef: v1alpha2.VMBDAObjectRef{Kind: v1alpha2.VMBDAObjectRefKindVirtualDisk, Name: disk}},
			Status: v1alpha2.VirtualMachineBlockDeviceAttachmentStatus{Phase: phase}}
	}
	attachments := []v1alpha2.VirtualMachineBlockDeviceAttachment{
		attachment("plugged", d.Name, v1alpha2.BlockDeviceAttachmentPhaseAttached),
		attachment("unplugging", d.Name, v1alpha2.BlockDeviceAttachmentPhaseTerminating),
		attachment("waiting", d.Name, v1alpha2.BlockDeviceAttachmentPhasePending),
		attachment("failed", d.Name, v1alpha2.BlockDeviceAttachmentPhaseFailed),
		attachment("other-disk", "other", v1alpha2.BlockDeviceAttachmentPhaseAttached),
	}
	got := Consumers(d, ClaimName(d), pods, attachments)
	want := []string{"VirtualMachine vm1", "VirtualMachineBlockDeviceAttachment plugged", "VirtualMachineBlockDeviceAttachment unplugging", "Pod virt-launcher-a"}
	if !slices.Equal(got, want) {
		t.Errorf("Consumers = %q, want %q", got, want)
	}
}
