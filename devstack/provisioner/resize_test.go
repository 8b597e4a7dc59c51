package provisioner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func storage(n int64) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(n, resource.BinarySI)}
}

// boundPair is a bound claim of want bytes on a PV of this provisioner of have bytes, whose
// status says capacity bytes.
func boundPair(mode corev1.PersistentVolumeMode, want, have, capacity int64) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-1", VolumeMode: &mode,
			Resources: corev1.VolumeResourceRequirements{Requests: storage(want)}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: storage(capacity)},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": Name}},
		Spec: corev1.PersistentVolumeSpec{Capacity: storage(have), VolumeMode: &mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/v/pvc-1/mount"}}},
	}
	return pvc, pv
}

func TestNextStep(t *testing.T) {
	fs, block := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock
	resizing := func(pvc *corev1.PersistentVolumeClaim, allocated int64) {
		pvc.Status.AllocatedResources = storage(allocated)
		setAllocatedStatus(pvc, corev1.PersistentVolumeClaimControllerResizeInProgress)
		setCondition(pvc, &corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue})
	}
	for _, tt := range []struct {
		name  string
		mode  corev1.PersistentVolumeMode
		want  int64 // requested
		have  int64 // the PV's capacity
		cap   int64 // the claim's status
		edit  func(*corev1.PersistentVolumeClaim, *corev1.PersistentVolume)
		step  Step
		bytes int64
	}{
		{name: "steady", mode: fs, want: 64 * mib, have: 64 * mib, cap: 64 * mib, step: StepNone},
		{name: "request not whole MiB is the volume already", mode: fs, want: 64*mib - 5, have: 64 * mib, cap: 64 * mib, step: StepNone},
		{name: "grown: start", mode: fs, want: 128 * mib, have: 64 * mib, cap: 64 * mib, step: StepStart, bytes: 128 * mib},
		{name: "grown again while resizing: start anew", mode: fs, want: 256 * mib, have: 64 * mib, cap: 64 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { resizing(c, 128*mib) }, step: StepStart, bytes: 256 * mib},
		{name: "started: expand", mode: fs, want: 128 * mib, have: 64 * mib, cap: 64 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { resizing(c, 128*mib) }, step: StepExpand, bytes: 128 * mib},
		{name: "expanded filesystem: resize it", mode: fs, want: 128 * mib, have: 128 * mib, cap: 64 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { resizing(c, 128*mib) }, step: StepResizeFS, bytes: 128 * mib},
		{name: "expanded block: finish", mode: block, want: 128 * mib, have: 128 * mib, cap: 64 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { resizing(c, 128*mib) }, step: StepFinish, bytes: 128 * mib},
		{name: "capacity reported, conditions left: finish", mode: fs, want: 128 * mib, have: 128 * mib, cap: 128 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { resizing(c, 128*mib) }, step: StepFinish, bytes: 128 * mib},
		{name: "shrunk request (recovery from a failed resize): nothing", mode: fs, want: 32 * mib, have: 64 * mib, cap: 64 * mib, step: StepNone},
		{name: "not bound", mode: fs, want: 128 * mib, have: 64 * mib, cap: 64 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
				c.Status.Phase = corev1.ClaimPending
			}, step: StepNone},
		{name: "another volume", mode: fs, want: 128 * mib, have: 64 * mib, cap: 64 * mib,
			edit: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { c.Spec.VolumeName = "other" }, step: StepNone},
		{name: "another provisioner's PV", mode: fs, want: 128 * mib, have: 64 * mib, cap: 64 * mib,
			edit: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
				v.Annotations["pv.kubernetes.io/provisioned-by"] = "example.com/other"
			}, step: StepNone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pvc, pv := boundPair(tt.mode, tt.want, tt.have, tt.cap)
			if tt.edit != nil {
				tt.edit(pvc, pv)
			}
			step, bytes := NextStep(pvc, pv)
			if step != tt.step || bytes != tt.bytes {
				t.Fatalf("NextStep = %s %d, want %s %d", step, bytes, tt.step, tt.bytes)
			}
		})
	}
	if step, _ := NextStep(&corev1.PersistentVolumeClaim{}, nil); step != StepNone {
		t.Errorf("no PV: %s", step)
	}
}

func TestSetConditionKeepsOthers(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{}
	pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "ModifyingVolume", Status: corev1.ConditionTrue},
		{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
	setCondition(pvc, &corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue})
	if len(pvc.Status.Conditions) != 2 || pvc.Status.Conditions[0].Type != "ModifyingVolume" ||
		pvc.Status.Conditions[1].Type != corev1.PersistentVolumeClaimFileSystemResizePending {
		t.Errorf("conditions %+v", pvc.Status.Conditions)
	}
	setCondition(pvc, nil)
	setAllocatedStatus(pvc, "")
	if len(pvc.Status.Conditions) != 1 || pvc.Status.AllocatedResourceStatuses != nil {
		t.Errorf("status %+v", pvc.Status)
	}
}
