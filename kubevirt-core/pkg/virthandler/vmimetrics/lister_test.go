package vmimetrics

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/d8virt/kubevirt-core/pkg/corescheme"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// connected knows a client for some Pods.
type connected map[types.UID]bool

func (c connected) Client(uid types.UID) *launcherapi.Client {
	if c[uid] {
		return &launcherapi.Client{}
	}
	return nil
}

func TestNodeLister(t *testing.T) {
	scheme, err := corescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	// vmi is a VMI labelled for node1, with its status on node and phase; with a launcher pod
	// (uid "pod-<name>") on podNode in podPhase unless podNode is empty.
	vmi := func(name, node string, phase kubevirtv1.VirtualMachineInstancePhase, podNode string, podPhase corev1.PodPhase) {
		v := &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{kubevirtv1.NodeNameLabel: "node1"}},
			Status:     kubevirtv1.VirtualMachineInstanceStatus{NodeName: node, Phase: phase},
		}
		objs = append(objs, v)
		if podNode == "" {
			return
		}
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-" + name, UID: types.UID("pod-" + name), Labels: launcherpod.Labels(v.UID),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance", Name: name, UID: v.UID, Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{NodeName: podNode},
			Status: corev1.PodStatus{Phase: podPhase},
		})
	}
	vmi("running", "node1", kubevirtv1.Running, "node1", corev1.PodRunning)
	vmi("not-connected", "node1", kubevirtv1.Running, "node1", corev1.PodRunning)
	vmi("scheduled", "node1", kubevirtv1.Scheduled, "node1", corev1.PodRunning)
	vmi("moved-away", "node2", kubevirtv1.Running, "node2", corev1.PodRunning)
	vmi("pod-pending", "node1", kubevirtv1.Running, "node1", corev1.PodPending)
	vmi("no-pod", "node1", kubevirtv1.Running, "", "")
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	conns := connected{"pod-running": true, "pod-scheduled": true, "pod-moved-away": true, "pod-pod-pending": true}

	got, err := NewNodeLister(c, "node1", conns).Instances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range got {
		if in.Node != "node1" || in.Namespace != "ns" || in.Stats == nil {
			t.Errorf("instance %+v", in)
		}
		names = append(names, in.Name)
	}
	if !slices.Equal(names, []string{"running"}) {
		t.Errorf("instances %v, want only the running VMI whose launcher is connected", names)
	}
}
