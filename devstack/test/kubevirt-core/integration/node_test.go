package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/node"
)

// testHeartbeatTimeout stands for KubeVirt's five minutes in the fixture's node controller.
const testHeartbeatTimeout = 3 * time.Second

// beat plays virt-handler: it writes a fresh heartbeat on the Node.
func beat(ctx context.Context, fx *fixture, name string) error {
	var n corev1.Node
	if err := fx.client.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[kubevirtv1.VirtHandlerHeartbeat] = time.Now().UTC().Format(time.RFC3339)
	return fx.client.Patch(ctx, &n, patch)
}

// placeVMI plays the scheduler and virt-handler: the VMI runs on the node.
func placeVMI(t *testing.T, fx *fixture, key client.ObjectKey, nodeName string) {
	t.Helper()
	eventually(t, "VMI running on "+nodeName, func(ctx context.Context) error {
		var vmi kubevirtv1.VirtualMachineInstance
		if err := fx.client.Get(ctx, key, &vmi); err != nil {
			return err
		}
		vmi.Status.Phase = kubevirtv1.Running
		vmi.Status.NodeName = nodeName
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue}}
		return fx.client.Update(ctx, &vmi)
	})
}

func TestNodeHeartbeatLossFailsVMIs(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	nodeName := "hb-" + ns

	// A virt-handler node, created through the sidecar with KubeVirt's names.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        nodeName,
		Labels:      map[string]string{kubevirtv1.NodeSchedulable: "true"},
		Annotations: map[string]string{kubevirtv1.VirtHandlerHeartbeat: time.Now().UTC().Format(time.RFC3339)},
	}}
	if err := fx.client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.client.Delete(context.Background(), n) })

	// "lost" has no launcher on the node; "alive" has one bound there, which may still run the
	// guest, so it must survive the node's death.
	for _, name := range []string{"lost", "alive"} {
		if err := fx.client.Create(ctx, newVMI(ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	var alive kubevirtv1.VirtualMachineInstance
	eventually(t, "alive VMI scheduling", vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "alive"}, kubevirtv1.Scheduling, &alive))
	var pod corev1.Pod
	eventually(t, "alive launcher", oneLauncher(fx, &alive, &pod))
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: nodeName}}
	if err := fx.env.Kube.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "lost VMI scheduling", vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "lost"}, kubevirtv1.Scheduling, &kubevirtv1.VirtualMachineInstance{}))
	placeVMI(t, fx, client.ObjectKey{Namespace: ns, Name: "lost"}, nodeName)
	placeVMI(t, fx, client.ObjectKey{Namespace: ns, Name: "alive"}, nodeName)

	// While virt-handler beats, for longer than the timeout, nothing happens.
	for deadline := time.Now().Add(2 * testHeartbeatTimeout); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err := beat(ctx, fx, nodeName); err != nil {
			t.Fatal(err)
		}
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "lost"}, kubevirtv1.Running, &vmi)(ctx); err != nil {
		t.Fatalf("with a live heartbeat: %v", err)
	}

	// virt-handler stops beating.
	eventually(t, "node unschedulable", func(ctx context.Context) error {
		var cur corev1.Node
		if err := fx.client.Get(ctx, client.ObjectKey{Name: nodeName}, &cur); err != nil {
			return err
		}
		if v := cur.Labels[kubevirtv1.NodeSchedulable]; v != "false" {
			return fmt.Errorf("schedulable %q", v)
		}
		return nil
	})
	eventually(t, "VMI failed", vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "lost"}, kubevirtv1.Failed, &vmi))
	var why string
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionFalse {
			why = c.Reason
		}
	}
	if why != node.ReasonNodeUnresponsive || vmi.Status.Reason != node.ReasonNodeUnresponsive {
		t.Errorf("failed VMI: reason %q conditions %+v", vmi.Status.Reason, vmi.Status.Conditions)
	}
	// The controller has had several rechecks since; the VMI whose launcher lives is untouched.
	time.Sleep(2 * time.Second)
	if err := vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "alive"}, kubevirtv1.Running, &alive)(ctx); err != nil {
		t.Errorf("VMI with a live launcher: %v", err)
	}

	// The launcher goes too: now that VMI fails as well.
	zero := int64(0)
	if err := fx.env.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI without launcher failed", vmiPhase(fx, client.ObjectKey{Namespace: ns, Name: "alive"}, kubevirtv1.Failed, &alive))
	if alive.Status.Reason != node.ReasonNodeUnresponsive {
		t.Errorf("reason %q", alive.Status.Reason)
	}
}
