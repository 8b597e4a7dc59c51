package vmi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func hotVolume(name string) kubevirtv1.Volume {
	return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
		Hotpluggable: true, PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name + "-claim"}}}}
}

func attachPod(name string, phase corev1.PodPhase, volumes ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Status: corev1.PodStatus{Phase: phase}}
	for _, v := range volumes {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v})
	}
	return p
}

func TestPlanHotplug(t *testing.T) {
	for _, tc := range []struct {
		name        string
		volumes     []string
		pods        []corev1.Pod
		wantCreate  bool
		wantCurrent string
		wantDelete  []string
	}{
		{name: "nothing hotplugged"},
		{name: "first volume", volumes: []string{"a"}, wantCreate: true},
		{name: "pod in place", volumes: []string{"a"}, pods: []corev1.Pod{attachPod("p1", corev1.PodRunning, "a")}, wantCurrent: "p1"},
		{name: "a second volume: a new pod, the old one stays until it runs", volumes: []string{"a", "b"},
			pods: []corev1.Pod{attachPod("p1", corev1.PodRunning, "a")}, wantCreate: true},
		{name: "new pod pending: old stays", volumes: []string{"a", "b"},
			pods:        []corev1.Pod{attachPod("p1", corev1.PodRunning, "a"), attachPod("p2", corev1.PodPending, "b", "a")},
			wantCurrent: "p2"},
		{name: "new pod runs: old goes", volumes: []string{"a", "b"},
			pods:        []corev1.Pod{attachPod("p1", corev1.PodRunning, "a"), attachPod("p2", corev1.PodRunning, "a", "b")},
			wantCurrent: "p2", wantDelete: []string{"p1"}},
		{name: "all removed: every pod goes", pods: []corev1.Pod{attachPod("p1", corev1.PodRunning, "a")}, wantDelete: []string{"p1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vols []kubevirtv1.Volume
			for _, v := range tc.volumes {
				vols = append(vols, hotVolume(v))
			}
			p := PlanHotplug(vols, tc.pods)
			current := ""
			if p.Current != nil {
				current = p.Current.Name
			}
			var deleted []string
			for _, d := range p.Delete {
				deleted = append(deleted, d.Name)
			}
			if p.Create != tc.wantCreate || current != tc.wantCurrent || !sameNames(deleted, tc.wantDelete) {
				t.Errorf("plan: create %v, current %q, delete %v; want %v, %q, %v", p.Create, current, deleted, tc.wantCreate, tc.wantCurrent, tc.wantDelete)
			}
		})
	}
}

func TestHotplugVolumeStatus(t *testing.T) {
	running := attachPod("hp-volume-1", corev1.PodRunning, "a")
	pending := attachPod("hp-volume-1", corev1.PodPending, "a")
	hp := &kubevirtv1.HotplugVolumeStatus{AttachPodName: "hp-volume-1", AttachPodUID: "uid-hp-volume-1"}
	for _, tc := range []struct {
		name    string
		spec    []string
		st      []kubevirtv1.VolumeStatus
		current *corev1.Pod
		want    map[string]kubevirtv1.VolumePhase
	}{
		{name: "no pod yet", spec: []string{"a"}, want: map[string]kubevirtv1.VolumePhase{"a": kubevirtv1.VolumePending}},
		{name: "pod pending", spec: []string{"a"}, current: &pending, want: map[string]kubevirtv1.VolumePhase{"a": kubevirtv1.VolumePending}},
		{name: "pod running", spec: []string{"a"}, current: &running, want: map[string]kubevirtv1.VolumePhase{"a": kubevirtv1.HotplugVolumeAttachedToNode}},
		{name: "the handler's phases stay", spec: []string{"a"}, current: &running,
			st:   []kubevirtv1.VolumeStatus{{Name: "a", Phase: kubevirtv1.VolumeReady, HotplugVolume: hp}},
			want: map[string]kubevirtv1.VolumePhase{"a": kubevirtv1.VolumeReady}},
		{name: "removed before it was mounted: gone",
			st:   []kubevirtv1.VolumeStatus{{Name: "a", Phase: kubevirtv1.HotplugVolumeAttachedToNode, HotplugVolume: hp}},
			want: map[string]kubevirtv1.VolumePhase{}},
		{name: "removed while mounted: the handler drops it",
			st:   []kubevirtv1.VolumeStatus{{Name: "a", Phase: kubevirtv1.VolumeReady, HotplugVolume: hp}},
			want: map[string]kubevirtv1.VolumePhase{"a": kubevirtv1.VolumeReady}},
		{name: "other volumes stay", st: []kubevirtv1.VolumeStatus{{Name: "root", Phase: kubevirtv1.VolumeReady}},
			want: map[string]kubevirtv1.VolumePhase{"root": kubevirtv1.VolumeReady}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := newVMI(func(v *kubevirtv1.VirtualMachineInstance) {
				v.Spec.Volumes = []kubevirtv1.Volume{{Name: "root"}}
				for _, n := range tc.spec {
					v.Spec.Volumes = append(v.Spec.Volumes, hotVolume(n))
				}
			})
			got := HotplugVolumeStatus(vmi, tc.st, tc.current, nil)
			phases := map[string]kubevirtv1.VolumePhase{}
			for _, s := range got {
				phases[s.Name] = s.Phase
				if tc.current != nil && s.HotplugVolume != nil && s.HotplugVolume.AttachPodName != tc.current.Name {
					t.Errorf("%s: attach pod %q", s.Name, s.HotplugVolume.AttachPodName)
				}
			}
			if len(phases) != len(tc.want) {
				t.Fatalf("status %+v, want phases %v", got, tc.want)
			}
			for n, p := range tc.want {
				if phases[n] != p {
					t.Errorf("%s: phase %q, want %q", n, phases[n], p)
				}
			}
		})
	}
}

func TestNewAttachmentPod(t *testing.T) {
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-x", Namespace: "ns", UID: "l-uid"}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	pod := NewAttachmentPod(launcher, []kubevirtv1.Volume{hotVolume("a"), hotVolume("b")}, map[string]bool{"b": true}, "img")
	ref := metav1.GetControllerOf(pod)
	term := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]
	c := pod.Spec.Containers[0]
	if pod.GenerateName != "hp-volume-" || pod.Labels[kubevirtv1.AppLabel] != "hotplug-disk" || ref == nil || ref.UID != "l-uid" ||
		term.Values[0] != "node-1" || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "a-claim" || pod.Spec.Volumes[1].PersistentVolumeClaim.ClaimName != "b-claim" ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/path/a" ||
		len(c.VolumeDevices) != 1 || c.VolumeDevices[0].Name != "b" || c.VolumeDevices[0].DevicePath != "/dev/hotplug/b" {
		t.Errorf("attachment pod %+v", pod)
	}
}
