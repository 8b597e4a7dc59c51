package vmi

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/kit"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Reasons on the volume status of hotplugged volumes, as KubeVirt's controller writes them.
const (
	ReasonHotplugPodCreated = "SuccessfulCreate"
	ReasonVolumeAttached    = "SuccessfulMount"
)

// attachmentCommand keeps the attachment Pod's container alive doing nothing: it exists for
// its mounts. It ends at once on SIGTERM.
var attachmentCommand = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1 & wait; done"}

// NewAttachmentPod builds the hotplug attachment Pod of a running VMI, as KubeVirt shapes it:
// owned by the launcher Pod (it goes with it), on the launcher's node, holding the claim of
// every hotplugged volume (one Pod holds them all; a changed set gets a new Pod): mounted, or as
// a device for the volumes block says are in volume mode Block.
func NewAttachmentPod(launcher *corev1.Pod, volumes []kubevirtv1.Volume, block map[string]bool, image string) *corev1.Pod {
	hostToContainer := corev1.MountPropagationHostToContainer
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	var devices []corev1.VolumeDevice
	for i := range volumes {
		v := &volumes[i]
		readOnly := v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
		vols = append(vols, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: hotplug.ClaimName(v), ReadOnly: readOnly},
		}})
		if block[v.Name] {
			devices = append(devices, corev1.VolumeDevice{Name: v.Name, DevicePath: hotplug.AttachmentDeviceDir + "/" + v.Name})
			continue
		}
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: hotplug.AttachmentMountDir + "/" + v.Name, MountPropagation: &hostToContainer})
	}
	no := false
	grace := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: hotplug.AttachmentPodPrefix,
			Namespace:    launcher.Namespace,
			Labels:       map[string]string{kubevirtv1.AppLabel: hotplug.AttachmentPodLabel},
			OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(launcher, corev1.SchemeGroupVersion.WithKind("Pod")),
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            hotplug.AttachmentPodLabel,
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         attachmentCommand,
				VolumeMounts:    mounts,
				VolumeDevices:   devices,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("2M")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("80M")},
				},
			}},
			Volumes: vols,
			// Pinned to the launcher's node: virt-handler there hands the claims to the launcher.
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{launcher.Spec.NodeName}}},
				}}},
			}},
			Tolerations:                   launcher.Spec.Tolerations,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			EnableServiceLinks:            &no,
			AutomountServiceAccountToken:  &no,
		},
	}
}

// attachmentVolumes are the names of the volumes an attachment Pod mounts, sorted.
func attachmentVolumes(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out
}

func volumeNames(vols []kubevirtv1.Volume) []string {
	var out []string
	for _, v := range vols {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// HotplugPlan is what the controller does about a running VMI's hotplugged volumes.
type HotplugPlan struct {
	// Create is true when no attachment Pod holds exactly the hotplugged volumes.
	Create bool
	// Delete are attachment Pods of an earlier set: they go once the current one runs (so a
	// volume that stays never loses its Pod), or at once when nothing is hotplugged any more.
	Delete []*corev1.Pod
	// Current is the Pod holding the current set, nil if none.
	Current *corev1.Pod
}

// PlanHotplug decides about the attachment Pods from the VMI's hotplugged volumes and the Pods
// there are (the launcher's, not being deleted).
func PlanHotplug(volumes []kubevirtv1.Volume, pods []corev1.Pod) HotplugPlan {
	want := volumeNames(volumes)
	var p HotplugPlan
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && len(want) > 0 && sameNames(attachmentVolumes(&pods[i]), want) && p.Current == nil {
			p.Current = &pods[i]
		}
	}
	p.Create = len(want) > 0 && p.Current == nil
	replaced := len(want) == 0 || (p.Current != nil && p.Current.Status.Phase == corev1.PodRunning)
	for i := range pods {
		if &pods[i] != p.Current && pods[i].DeletionTimestamp == nil && replaced {
			p.Delete = append(p.Delete, &pods[i])
		}
	}
	return p
}

// HotplugVolumeStatus updates the volume status of the hotplugged volumes: each gets an entry
// with its attachment Pod, Pending until that runs on the node, then AttachedToNode; what
// virt-handler reports later (MountedToPod, Ready) stays. Entries of volumes no longer in the
// spec go once virt-handler is done with them: at once when it never mounted them.
func HotplugVolumeStatus(vmi *kubevirtv1.VirtualMachineInstance, st []kubevirtv1.VolumeStatus, current *corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim) []kubevirtv1.VolumeStatus {
	inSpec := map[string]bool{}
	for _, v := range vmi.Spec.Volumes {
		inSpec[v.Name] = true
	}
	var out []kubevirtv1.VolumeStatus
	index := map[string]int{}
	for i := range st {
		s := st[i].DeepCopy()
		if s.HotplugVolume != nil && !inSpec[s.Name] && !handlerOwned(s.Phase) {
			continue
		}
		index[s.Name] = len(out)
		out = append(out, *s)
	}
	for _, v := range hotplug.Volumes(&vmi.Spec) {
		i, ok := index[v.Name]
		if !ok {
			out = append(out, kubevirtv1.VolumeStatus{Name: v.Name, Target: ""})
			i = len(out) - 1
		}
		s := &out[i]
		if pvc := claims[hotplug.ClaimName(&v)]; pvc != nil {
			s.PersistentVolumeClaimInfo = claimInfo(pvc)
		}
		if s.HotplugVolume == nil {
			s.HotplugVolume = &kubevirtv1.HotplugVolumeStatus{}
		}
		if current != nil {
			s.HotplugVolume.AttachPodName, s.HotplugVolume.AttachPodUID = current.Name, current.UID
		}
		if handlerOwned(s.Phase) {
			continue
		}
		switch {
		case current != nil && current.Status.Phase == corev1.PodRunning:
			s.Phase, s.Reason = kubevirtv1.HotplugVolumeAttachedToNode, ReasonVolumeAttached
			s.Message = fmt.Sprintf("Created hotplug attachment pod %s, for volume %s", current.Name, v.Name)
		case current != nil:
			s.Phase, s.Reason = kubevirtv1.VolumePending, ReasonHotplugPodCreated
			s.Message = fmt.Sprintf("Created hotplug attachment pod %s, for volume %s", current.Name, v.Name)
		default:
			s.Phase = kubevirtv1.VolumePending
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// handlerOwned reports whether virt-handler has taken a volume over: it mounted it into the
// launcher (and the guest may have it).
func handlerOwned(p kubevirtv1.VolumePhase) bool {
	return p == kubevirtv1.HotplugVolumeMounted || p == kubevirtv1.VolumeReady || p == kubevirtv1.HotplugVolumeDetaching
}

// syncHotplug keeps the attachment Pods of a running VMI in line with its hotplugged volumes and
// records their state in d's volume status. wait tells that a claim does not exist yet: claims
// are not watched, so the caller looks again after claimRetry.
func (r *Reconciler) syncHotplug(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, launcher *corev1.Pod, d *Decision) (wait bool, err error) {
	if vmi.DeletionTimestamp != nil || d.Status.Phase != kubevirtv1.Running || launcher == nil ||
		launcher.Status.Phase != corev1.PodRunning || launcher.DeletionTimestamp != nil {
		return false, nil
	}
	volumes := hotplug.Volumes(&vmi.Spec)
	pods, err := r.attachmentPods(ctx, r.Client, launcher)
	if err != nil {
		return false, err
	}
	if PlanHotplug(volumes, pods).Create {
		// The cache may not show a Pod created a moment ago: ask the apiserver before making one.
		if pods, err = r.attachmentPods(ctx, r.apiReader, launcher); err != nil {
			return false, err
		}
	}
	// Claims are read (past the cache, get only) while the status lacks them, as at start.
	recorded := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		recorded[s.Name] = s.PersistentVolumeClaimInfo != nil
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	known := 0
	for i := range volumes {
		if recorded[volumes[i].Name] {
			known++
			continue
		}
		name := hotplug.ClaimName(&volumes[i])
		pvc, err := kit.Get[corev1.PersistentVolumeClaim](ctx, r.apiReader, client.ObjectKey{Namespace: vmi.Namespace, Name: name})
		if err != nil {
			return false, fmt.Errorf("get claim %s: %w", name, err)
		}
		if pvc != nil {
			claims[name] = pvc
			known++
		}
	}
	plan := PlanHotplug(volumes, pods)
	logger := log.FromContext(ctx)
	// A missing claim holds the Pod back: it could not start.
	if plan.Create && known == len(volumes) {
		block := map[string]bool{}
		for i := range volumes {
			name := volumes[i].Name
			pvc := claims[hotplug.ClaimName(&volumes[i])]
			block[name] = launcherapi.BlockVolume(vmi, name) || (pvc != nil && pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock)
		}
		pod := NewAttachmentPod(launcher, volumes, block, r.Launcher.Image)
		if err := r.Client.Create(ctx, pod); err != nil {
			return false, fmt.Errorf("create attachment pod: %w", err)
		}
		plan.Current = pod
		logger.Info("created hotplug attachment pod", "pod", pod.Name, "volumes", volumeNames(volumes))
	}
	for _, p := range plan.Delete {
		if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete attachment pod %s: %w", p.Name, err)
		}
		logger.Info("deleted hotplug attachment pod", "pod", p.Name)
	}
	d.Status.VolumeStatus = HotplugVolumeStatus(vmi, d.Status.VolumeStatus, plan.Current, claims)
	return known < len(volumes), nil
}

// attachmentPods lists the attachment Pods the launcher Pod controls.
func (r *Reconciler) attachmentPods(ctx context.Context, reader client.Reader, launcher *corev1.Pod) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := reader.List(ctx, &list, client.InNamespace(launcher.Namespace), client.MatchingLabels{kubevirtv1.AppLabel: hotplug.AttachmentPodLabel}); err != nil {
		return nil, fmt.Errorf("list attachment pods: %w", err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if metav1.IsControlledBy(&p, launcher) {
			out = append(out, p)
		}
	}
	return out, nil
}

// attachmentPodVMI maps an attachment Pod's events to its VMI: the Pod's owner is the launcher
// Pod, whose owner is the VMI.
func (r *Reconciler) attachmentPodVMI(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetLabels()[kubevirtv1.AppLabel] != hotplug.AttachmentPodLabel {
		return nil
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Pod" {
		return nil
	}
	launcher := &corev1.Pod{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, launcher); err != nil {
		return nil
	}
	owner := metav1.GetControllerOf(launcher)
	if owner == nil || owner.Kind != kubevirtv1.VirtualMachineInstanceGroupVersionKind.Kind {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: owner.Name}}}
}
