package migration

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vmi"
)

// NewTargetPod builds the virt-launcher Pod that is to receive the guest: the VMI's launcher Pod,
// labelled and annotated with the migration so that the controller finds it, and kept off every
// node that runs a Pod of this VMI (the source) by a required anti-affinity, as in KubeVirt.
func NewTargetPod(v *kubevirtv1.VirtualMachineInstance, m *kubevirtv1.VirtualMachineInstanceMigration, cfg vmi.LauncherConfig) *corev1.Pod {
	pod := vmi.NewLauncherPod(v, cfg)
	pod.Labels[kubevirtv1.MigrationJobLabel] = string(m.UID)
	pod.Annotations[kubevirtv1.MigrationJobNameAnnotation] = m.Name
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{kubevirtv1.CreatedByLabel: string(v.UID)}},
		TopologyKey:   corev1.LabelHostname,
	}
	// NewLauncherPod shares nothing with the VMI, so the affinity may be changed in place.
	aff := pod.Spec.Affinity
	if aff == nil {
		aff = &corev1.Affinity{}
	} else {
		aff = aff.DeepCopy()
	}
	if aff.PodAntiAffinity == nil {
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
	pod.Spec.Affinity = aff
	return pod
}
