package migration

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vmi"
)

// NetworkPriorityLabel orders the Pods of one VM that share its requested address during a
// migration, as the reference module's CNI reads it: the lowest number gets the address's
// traffic, a Pod without the label comes last.
const NetworkPriorityLabel = "network.deckhouse.io/pod-common-ip-priority"

// The priorities of a migration's Pods, the reference module's: the source keeps the traffic
// while the target prepares; the target gets it once the source is gone.
const (
	PrioritySource = "1"
	PriorityTarget = "2"
)

// NewTargetPod builds the virt-launcher Pod that is to receive the guest: the VMI's launcher Pod,
// labelled and annotated with the migration so that the controller finds it, with the target's
// network priority (it may share the VM's requested address), and kept off every
// node that runs a Pod of this VMI (the source) by a required anti-affinity, as in KubeVirt.
func NewTargetPod(v *kubevirtv1.VirtualMachineInstance, m *kubevirtv1.VirtualMachineInstanceMigration, cfg vmi.LauncherConfig) *corev1.Pod {
	pod := vmi.NewLauncherPod(v, cfg)
	pod.Labels[kubevirtv1.MigrationJobLabel] = string(m.UID)
	pod.Labels[NetworkPriorityLabel] = PriorityTarget
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
