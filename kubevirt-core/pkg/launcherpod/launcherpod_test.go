package launcherpod

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func testVMI() *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "vmi-uid"},
	}
}

func pod(name string, labels map[string]string, owner *kubevirtv1.VirtualMachineInstance, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, kubevirtv1.VirtualMachineInstanceGroupVersionKind)}
	}
	return p
}

func TestList(t *testing.T) {
	v := testVMI()
	other := testVMI()
	other.UID = "other-uid"
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		pod("own-n1", Labels(v.UID), v, "n1"),
		pod("own-n2", Labels(v.UID), v, "n2"),
		// A copied label: somebody else's Pod.
		pod("copied", Labels(v.UID), other, "n1"),
		pod("unlabelled", nil, v, "n1"),
		pod("other-vmi", Labels(other.UID), other, "n1"),
	).Build()
	ctx := context.Background()
	names := func(pods []corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	all, err := List(ctx, c, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(all); len(got) != 2 || got[0] != "own-n1" || got[1] != "own-n2" {
		t.Errorf("List: %v", got)
	}
	onN2, err := List(ctx, c, v, func(p *corev1.Pod) bool { return p.Spec.NodeName == "n2" })
	if err != nil {
		t.Fatal(err)
	}
	if got := names(onN2); len(got) != 1 || got[0] != "own-n2" {
		t.Errorf("List on n2: %v", got)
	}
}

func TestCurrentPrefersLivePod(t *testing.T) {
	gone := metav1.Now()
	old := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old", DeletionTimestamp: &gone}}
	live := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "live"}}
	if got := Current([]corev1.Pod{old, live}); got.Name != "live" {
		t.Errorf("Current picked %s", got.Name)
	}
	if got := Current([]corev1.Pod{old}); got.Name != "old" {
		t.Errorf("Current of a terminating Pod alone: %v", got)
	}
	if Current(nil) != nil {
		t.Error("Current of nothing")
	}
}

func TestGracePeriodSeconds(t *testing.T) {
	v := testVMI()
	if got := GracePeriodSeconds(v); got != kubevirtv1.DefaultGracePeriodSeconds {
		t.Errorf("default grace %d", got)
	}
	five := int64(5)
	v.Spec.TerminationGracePeriodSeconds = &five
	if got := GracePeriodSeconds(v); got != 5 {
		t.Errorf("grace %d", got)
	}
}
