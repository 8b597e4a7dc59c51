package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/launcherpod"
)

// internalIDLabel is the launcher Pod's vmi.kubevirt.io/id as the cluster stores it.
const internalIDLabel = "vmi.kubevirt.internal.virtualization.deckhouse.io/id"

// A Service made through the rewriter that selects a VMI's launcher Pods by vmi.kubevirt.io/id,
// as newer KubeVirt clients expose a VM, gets the launcher's endpoint: the Pod and the selector
// are both stored renamed, so the cluster's endpoint controller matches them.
func TestServiceSelectsLauncherByVMIID(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	vmi := newVMI(ns, "exposed")
	if err := fx.client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	eventually(t, "launcher pod created", oneLauncher(fx, vmi, &pod))
	if pod.Labels[launcherpod.IDLabel] != "exposed" {
		t.Fatalf("launcher pod labels %v", pod.Labels)
	}
	stored, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Labels[internalIDLabel] != "exposed" || stored.Labels[launcherpod.IDLabel] != "" {
		t.Fatalf("stored pod labels %v", stored.Labels)
	}

	// Play the scheduler and the kubelet: bind the Pod to a node, give it an IP and make it Ready.
	node := "svc-test-" + ns
	fakeNode(t, fx, node)
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := fx.env.Kube.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const podIP = "10.244.7.9"
	eventually(t, "pod running with an IP", func(ctx context.Context) error {
		p, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, podIP, []corev1.PodIP{{IP: podIP}}
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		_, err = fx.env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exposed-ssh"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{launcherpod.IDLabel: "exposed"},
			Ports:    []corev1.ServicePort{{Name: "ssh", Port: 22, TargetPort: intstr.FromInt32(22)}},
		},
	}
	if err := fx.client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := fx.client.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil || svc.Spec.Selector[launcherpod.IDLabel] != "exposed" {
		t.Fatalf("service read back through the rewriter: selector %v, %v", svc.Spec.Selector, err)
	}
	if s, err := fx.env.Kube.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{}); err != nil || s.Spec.Selector[internalIDLabel] != "exposed" {
		t.Fatalf("stored service selector %v, %v", s.Spec.Selector, err)
	}
	eventually(t, "the service's endpoint is the launcher pod", func(ctx context.Context) error {
		slices, err := fx.env.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if len(e.Addresses) == 1 && e.Addresses[0] == podIP && e.TargetRef != nil && e.TargetRef.Name == pod.Name &&
					e.Conditions.Ready != nil && *e.Conditions.Ready {
					return nil
				}
			}
		}
		return fmt.Errorf("endpoint slices %+v", slices.Items)
	})
}
