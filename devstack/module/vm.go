package module

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The core's VM and VMI as the cluster holds them, and the label by which a launcher Pod names
// its VMI's UID (kubevirt.io/created-by, renamed).
var (
	vmResource  = schema.GroupVersionResource{Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationvirtualmachines"}
	vmiResource = schema.GroupVersionResource{Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationvirtualmachineinstances"}
)

const createdByLabel = "kubevirt.internal.virtualization.deckhouse.io/created-by"

// vmRunning tells whether a VM runs as a fresh look at the cluster shows it, and if not, why.
// After a stack restart, the VM and its VMI still say Running from before (their controllers
// have not looked yet), but the VMI's launcher Pod went with the node's shutdown and says so: only
// a VMI whose launcher Pod runs and is Ready counts. vmi and pods may be nil and empty.
func vmRunning(vm, vmi *unstructured.Unstructured, pods []corev1.Pod) (bool, string) {
	status, _, _ := unstructured.NestedString(vm.Object, "status", "printableStatus")
	if status != "Running" {
		return false, fmt.Sprintf("VM %s is %q", vm.GetName(), status)
	}
	if vmi == nil {
		return false, "no VMI yet"
	}
	if phase, _, _ := unstructured.NestedString(vmi.Object, "status", "phase"); phase != "Running" {
		return false, fmt.Sprintf("VMI is %s", phase)
	}
	why := fmt.Sprintf("VMI %s has no launcher pod", vmi.GetUID())
	for i := range pods {
		p := &pods[i]
		if p.Labels[createdByLabel] != string(vmi.GetUID()) || p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			return true, "running"
		}
		why = strings.TrimSpace(fmt.Sprintf("launcher pod %s is %s %s", p.Name, p.Status.Phase, p.Status.Reason))
		if p.Status.Phase == corev1.PodRunning {
			why += ", not Ready"
		}
	}
	return false, why
}

// WaitVM waits until the VM namespace/name runs (see vmRunning), logging each change of state.
func WaitVM(ctx context.Context, o Options, namespace, name string, timeout time.Duration) error {
	kube, dyn, err := clients(o.Stack)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	last := ""
	for {
		msg := ""
		vm, err := dyn.Resource(vmResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			var vmi *unstructured.Unstructured
			vmi, err = dyn.Resource(vmiResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				vmi, err = nil, nil
			}
			var pods *corev1.PodList
			if err == nil {
				pods, err = kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: createdByLabel})
			}
			if err == nil {
				var ok bool
				if ok, msg = vmRunning(vm, vmi, pods.Items); ok {
					o.logf("VM %s/%s runs after %s", namespace, name, time.Since(start).Round(time.Second))
					return nil
				}
			}
		}
		if err != nil {
			msg = err.Error()
		}
		if msg != last {
			o.logf("waiting for VM %s/%s: %s", namespace, name, msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("VM %s/%s does not run after %s: %s", namespace, name, timeout, last)
		case <-time.After(time.Second):
		}
	}
}
