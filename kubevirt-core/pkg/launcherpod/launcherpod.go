// Package launcherpod is what the components agree on about a VMI's launcher Pod: the labels
// that find it, the name of its compute container and the grace periods around the guest's.
// virt-controller builds the Pod from it; virt-handler finds the Pod, reads its container's exit
// and gives the guest its grace period; virt-launcher keeps the padding for itself. The names are
// KubeVirt v1.6's, which tools (kubectl, virtctl, monitoring) rely on.
package launcherpod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// AppLabelValue is the value of the kubevirt.io label on every launcher Pod.
	AppLabelValue = "virt-launcher"
	// ComputeContainer runs virt-launcher and, through it, QEMU.
	ComputeContainer = "compute"
	// IDLabel carries the VMI's name on its launcher Pods, as newer KubeVirt sets it (kubevirt.io/api
	// v1.6 has no constant for it): clients select a VM's Pods by it, e.g. to expose it as a Service.
	IDLabel = "vmi.kubevirt.io/id"
)

// GracePadding is the time in seconds the guest's grace period is padded with, twice: once so
// that virt-handler can shut the domain down before virt-launcher gives up on it (the launcher's
// --grace-period-seconds is the guest's plus GracePadding, and the launcher keeps the padding for
// itself), and once more before the Pod is killed (its terminationGracePeriodSeconds is the
// guest's plus twice GracePadding), so that the launcher is never killed while it is still
// tearing the guest down.
const GracePadding = 15

// GracePeriodSeconds is the guest's shutdown grace period: the VMI's, or KubeVirt's default.
func GracePeriodSeconds(vmi *kubevirtv1.VirtualMachineInstance) int64 {
	if vmi.Spec.TerminationGracePeriodSeconds != nil {
		return *vmi.Spec.TerminationGracePeriodSeconds
	}
	return kubevirtv1.DefaultGracePeriodSeconds
}

// Labels select the launcher Pods of the VMI with uid: its current one, one being replaced, a
// migration's target.
func Labels(uid types.UID) map[string]string {
	return map[string]string{kubevirtv1.AppLabel: AppLabelValue, kubevirtv1.CreatedByLabel: string(uid)}
}

// List reads the Pods labelled as vmi's launchers through r and keeps those vmi controls, and
// of those the ones keep accepts (all when keep is nil): a copied label must not make anybody
// take somebody else's Pod for the VMI's. The error is r's, unwrapped.
func List(ctx context.Context, r client.Reader, vmi *kubevirtv1.VirtualMachineInstance, keep func(*corev1.Pod) bool) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(vmi.Namespace), client.MatchingLabels(Labels(vmi.UID))); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if metav1.IsControlledBy(p, vmi) && (keep == nil || keep(p)) {
			out = append(out, *p)
		}
	}
	return out, nil
}

// Current picks the VMI's current Pod from its launcher Pods: one not being deleted if there is
// any, since a replacement may already run beside a terminating one. nil when there is none.
func Current(pods []corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if out == nil || (out.DeletionTimestamp != nil && p.DeletionTimestamp == nil) {
			out = p
		}
	}
	return out
}
