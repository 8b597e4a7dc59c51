package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// testLauncherImage never runs: there is no kubelet in these tests.
const testLauncherImage = "registry.invalid/virt-launcher:test"

// Renamed keys the cluster holds for the launcher Pod's kubevirt.io labels.
const (
	internalAppLabel       = "kubevirt.internal.virtualization.deckhouse.io"
	internalCreatedByLabel = "kubevirt.internal.virtualization.deckhouse.io/created-by"
	internalVMNameLabel    = "vm.kubevirt.internal.virtualization.deckhouse.io/name"
)

// newVMI asks for a node label no node has, so that the launcher Pod stays unschedulable until the
// test binds it itself, whatever Nodes other tests create.
func newVMI(ns, name string) *kubevirtv1.VirtualMachineInstance {
	grace := int64(10)
	return &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: kubevirtv1.VirtualMachineInstanceSpec{
			NodeSelector:                  map[string]string{"d8virt.test/nowhere": ns},
			TerminationGracePeriodSeconds: &grace,
			Domain: kubevirtv1.DomainSpec{
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resourceQuantity("128Mi")}},
			},
		},
	}
}

// launcherPods lists a VMI's launcher Pods through the sidecar, by the kubevirt.io label.
func launcherPods(ctx context.Context, fx *fixture, vmi *kubevirtv1.VirtualMachineInstance) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := fx.client.List(ctx, &list, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})
	return list.Items, err
}

func oneLauncher(fx *fixture, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		pods, err := launcherPods(ctx, fx, vmi)
		if err != nil {
			return err
		}
		if len(pods) != 1 {
			return fmt.Errorf("%d launcher pods", len(pods))
		}
		*pod = pods[0]
		return nil
	}
}

func vmiPhase(fx *fixture, key client.ObjectKey, want kubevirtv1.VirtualMachineInstancePhase, vmi *kubevirtv1.VirtualMachineInstance) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := fx.client.Get(ctx, key, vmi); err != nil {
			return err
		}
		if vmi.Status.Phase != want {
			return fmt.Errorf("phase %q, want %q", vmi.Status.Phase, want)
		}
		return nil
	}
}

// fakeNode registers a Node without a kubelet, only so that a bound Pod has a node that exists
// (the pod garbage collector deletes Pods bound to missing nodes).
func fakeNode(t *testing.T, fx *fixture, name string) {
	t.Helper()
	ctx := testenv.Context(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := fx.env.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fx.env.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func TestVMILauncherPodPhasesAndPodLoss(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	vmi := newVMI(ns, "web")
	// A named model and required features ask the launcher Pod for nodes the labeller labelled so.
	vmi.Spec.Domain.CPU = &kubevirtv1.CPU{Model: "Westmere", Features: []kubevirtv1.CPUFeature{{Name: "aes", Policy: "require"}, {Name: "vmx", Policy: "disable"}}}
	if err := fx.client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}

	var pod corev1.Pod
	eventually(t, "launcher pod created", oneLauncher(fx, vmi, &pod))
	wantSel := map[string]string{"d8virt.test/nowhere": ns, kubevirtv1.NodeSchedulable: "true",
		kubevirtv1.CPUModelLabel + "Westmere": "true", kubevirtv1.CPUFeatureLabel + "aes": "true"}
	if !maps.Equal(pod.Spec.NodeSelector, wantSel) {
		t.Errorf("node selector %v, want %v", pod.Spec.NodeSelector, wantSel)
	}
	if pod.GenerateName != "virt-launcher-web-" || pod.Labels[kubevirtv1.AppLabel] != "virt-launcher" ||
		pod.Labels[kubevirtv1.VirtualMachineNameLabel] != "web" || pod.Labels["app"] != "web" ||
		pod.Annotations[kubevirtv1.DomainAnnotation] != "web" || pod.Annotations["kubectl.kubernetes.io/default-container"] != "compute" {
		t.Errorf("pod metadata: generateName %q labels %v annotations %v", pod.GenerateName, pod.Labels, pod.Annotations)
	}
	if !metav1.IsControlledBy(&pod, vmi) || pod.OwnerReferences[0].APIVersion != "kubevirt.io/v1" {
		t.Errorf("owner %+v", pod.OwnerReferences)
	}
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "compute" || pod.Spec.Containers[0].Image != testLauncherImage ||
		!slices.Contains(pod.Spec.Containers[0].Command, "--uid") {
		t.Errorf("containers %+v", pod.Spec.Containers)
	}
	if pod.Spec.NodeSelector[kubevirtv1.NodeSchedulable] != "true" || *pod.Spec.TerminationGracePeriodSeconds != 40 ||
		len(pod.Spec.ReadinessGates) != 1 || pod.Spec.ReadinessGates[0].ConditionType != kubevirtv1.VirtualMachineUnpaused {
		t.Errorf("pod spec: nodeSelector %v grace %d gates %v", pod.Spec.NodeSelector, *pod.Spec.TerminationGracePeriodSeconds, pod.Spec.ReadinessGates)
	}
	mem := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]
	if guest := resourceQuantity("128Mi"); mem.Cmp(guest) <= 0 {
		t.Errorf("memory request %s carries no overhead", mem.String())
	}

	// In the cluster, the Pod carries the renamed keys and owner kind.
	direct, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The selector names the node labels as the cluster holds them (the labeller's, renamed).
	if direct.Spec.NodeSelector["cpu-feature.node.virtualization.deckhouse.io/aes"] != "true" {
		t.Errorf("stored node selector %v", direct.Spec.NodeSelector)
	}
	if direct.Labels[internalAppLabel] != "virt-launcher" || direct.Labels[internalCreatedByLabel] != string(vmi.UID) ||
		direct.Labels[internalVMNameLabel] != "web" || direct.Labels[kubevirtv1.CreatedByLabel] != "" ||
		direct.OwnerReferences[0].Kind != "InternalVirtualizationVirtualMachineInstance" {
		t.Errorf("stored pod labels %v owners %v", direct.Labels, direct.OwnerReferences)
	}

	// The scheduler finds no node: the VMI is Scheduling and says why.
	eventually(t, "VMI scheduling and unschedulable", func(ctx context.Context) error {
		if err := vmiPhase(fx, key, kubevirtv1.Scheduling, vmi)(ctx); err != nil {
			return err
		}
		for _, c := range vmi.Status.Conditions {
			if string(c.Type) == string(corev1.PodScheduled) && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return nil
			}
		}
		return fmt.Errorf("no Unschedulable condition: %+v", vmi.Status.Conditions)
	})
	if !slices.Contains(vmi.Finalizers, kubevirtv1.VirtualMachineInstanceFinalizer) {
		t.Errorf("finalizers %v", vmi.Finalizers)
	}

	// Play the scheduler: bind the Pod to a node.
	node := "vmi-test-" + ns
	fakeNode(t, fx, node)
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := fx.env.Kube.CoreV1().Pods(ns).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI scheduled", vmiPhase(fx, key, kubevirtv1.Scheduled, vmi))
	if vmi.Status.NodeName != node || vmi.Labels[kubevirtv1.NodeNameLabel] != node {
		t.Errorf("nodeName %q label %q, want %q", vmi.Status.NodeName, vmi.Labels[kubevirtv1.NodeNameLabel], node)
	}
	for _, c := range vmi.Status.Conditions {
		if string(c.Type) == string(corev1.PodScheduled) {
			t.Errorf("stale condition after binding: %+v", c)
		}
	}

	// Play the kubelet that lost the Pod: without a kubelet, only a zero grace period removes a
	// bound Pod.
	zero := int64(0)
	if err := fx.env.Kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI failed", vmiPhase(fx, key, kubevirtv1.Failed, vmi))
	var why string
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceReady && c.Status == corev1.ConditionFalse {
			why = c.Reason
		}
	}
	if why != kubevirtv1.PodNotExistsReason && why != kubevirtv1.PodTerminatingReason {
		t.Errorf("failed VMI conditions %+v", vmi.Status.Conditions)
	}
	if pods, err := launcherPods(ctx, fx, vmi); err != nil || len(pods) != 0 {
		t.Errorf("a failed VMI got a new pod: %d, %v", len(pods), err)
	}

	if err := fx.client.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI gone", func(ctx context.Context) error {
		if err := fx.client.Get(ctx, key, vmi); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VMI still there (finalizers %v): %v", vmi.Finalizers, err)
		}
		return nil
	})
}

func TestVMIDeletionDeletesPod(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	key := client.ObjectKey{Namespace: ns, Name: "gone"}
	vmi := newVMI(ns, "gone")
	if err := fx.client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	eventually(t, "launcher pod created", oneLauncher(fx, vmi, &pod))
	eventually(t, "VMI scheduling", vmiPhase(fx, key, kubevirtv1.Scheduling, vmi))

	// The finalizer holds the VMI until its Pod is gone.
	direct, err := fx.env.Dynamic.Resource(internalVMIs).Namespace(ns).Get(ctx, "gone", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(direct.GetFinalizers(), kubevirtv1.VirtualMachineInstanceFinalizer) {
		t.Errorf("stored finalizers %v", direct.GetFinalizers())
	}

	if err := fx.client.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI and pod gone", func(ctx context.Context) error {
		if _, err := fx.env.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod still there: %v", err)
		}
		if err := fx.client.Get(ctx, key, vmi); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VMI still there (finalizers %v): %v", vmi.Finalizers, err)
		}
		return nil
	})
}

// The VM and VMI controllers together: an Always VM ends with a launcher Pod of its VMI, and, as
// no node can take it, says so in its printableStatus.
func TestVMAlwaysGetsLauncherPod(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	if err := fx.client.Create(ctx, newVM(ns, "always", kubevirtv1.RunStrategyAlways)); err != nil {
		t.Fatal(err)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "always"}, &vmi)
	})
	var pod corev1.Pod
	eventually(t, "launcher pod", oneLauncher(fx, &vmi, &pod))
	if !metav1.IsControlledBy(&pod, &vmi) || pod.Labels["kubevirt.io/domain"] != "always" {
		t.Errorf("pod owners %v labels %v", pod.OwnerReferences, pod.Labels)
	}
	eventually(t, "VM unschedulable", vmStatus(fx, ns, "always", kubevirtv1.VirtualMachineStatusUnschedulable))
}
