package vmi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// ReasonPVCNotFound is KubeVirt's reason on Synchronized=False while a VMI waits for a claim its
// volumes use: no launcher Pod is made before every claim exists.
const ReasonPVCNotFound = "FailedPvcNotFound"

// ClaimNames lists the PersistentVolumeClaims the VMI's volumes use, in volume order.
func ClaimNames(vmi *kubevirtv1.VirtualMachineInstance) []string {
	var out []string
	for _, v := range vmi.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// ClaimsRecorded reports whether the status already holds the claim of every PVC volume.
func ClaimsRecorded(vmi *kubevirtv1.VirtualMachineInstance) bool {
	recorded := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		recorded[s.Name] = s.PersistentVolumeClaimInfo != nil
	}
	for _, v := range vmi.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !recorded[v.Name] {
			return false
		}
	}
	return true
}

// VolumeStatus returns st's volume status with the claim of every PVC volume recorded, as
// KubeVirt's controller does: the launcher cannot read the claim, and sizes the disk image of an
// empty filesystem claim from it. claims holds the claims that exist, by name; a volume whose
// claim is missing keeps what it had. Entries of other volumes stay as they are.
func VolumeStatus(vmi *kubevirtv1.VirtualMachineInstance, st []kubevirtv1.VolumeStatus, claims map[string]*corev1.PersistentVolumeClaim) []kubevirtv1.VolumeStatus {
	out := make([]kubevirtv1.VolumeStatus, len(st))
	index := map[string]int{}
	for i := range st {
		out[i] = *st[i].DeepCopy()
		index[st[i].Name] = i
	}
	for _, v := range vmi.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc := claims[v.PersistentVolumeClaim.ClaimName]
		if pvc == nil {
			continue
		}
		i, ok := index[v.Name]
		if !ok {
			out = append(out, kubevirtv1.VolumeStatus{Name: v.Name})
			i = len(out) - 1
			index[v.Name] = i
		}
		out[i].PersistentVolumeClaimInfo = claimInfo(pvc)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func claimInfo(pvc *corev1.PersistentVolumeClaim) *kubevirtv1.PersistentVolumeClaimInfo {
	mode := corev1.PersistentVolumeFilesystem
	if pvc.Spec.VolumeMode != nil {
		mode = *pvc.Spec.VolumeMode
	}
	info := &kubevirtv1.PersistentVolumeClaimInfo{
		ClaimName:   pvc.Name,
		AccessModes: append([]corev1.PersistentVolumeAccessMode(nil), pvc.Spec.AccessModes...),
		VolumeMode:  &mode,
	}
	if len(pvc.Status.Capacity) > 0 {
		info.Capacity = pvc.Status.Capacity.DeepCopy()
	}
	if len(pvc.Spec.Resources.Requests) > 0 {
		info.Requests = pvc.Spec.Resources.Requests.DeepCopy()
	}
	return info
}

// missingClaimMessage is KubeVirt's message for a VMI whose claim does not exist.
func missingClaimMessage(namespace, claim string) string {
	return fmt.Sprintf("PVC %s/%s does not exist, waiting for it to appear", namespace, claim)
}
