package vmisync

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// syncHotplug brings the VMI's hotplugged volumes into its running launcher (see
// virthandler/hotplug) and records their phases in st. The launcher gets the VMI again, with
// the new volume status, whenever it has a disk to attach or to detach.
func (r *Reconciler) syncHotplug(ctx context.Context, v *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, dom *launcherapi.DomainStatus, st *kubevirtv1.VirtualMachineInstanceStatus) error {
	if r.Hotplug == nil || pod == nil || pod.Status.Phase != corev1.PodRunning || dom == nil || !dom.Defined ||
		dom.Result != nil || st.Phase != kubevirtv1.Running || v.DeletionTimestamp != nil {
		return nil
	}
	cur := v.DeepCopy()
	cur.Status = *st.DeepCopy()
	res, err := r.Hotplug.Sync(ctx, cur, pod, dom)
	st.VolumeStatus = res.VolumeStatus
	if err != nil {
		return fmt.Errorf("hotplug volumes of %s/%s: %w", v.Namespace, v.Name, err)
	}
	if !res.LauncherSync {
		return nil
	}
	c, err := r.Conns.Ensure(pod.UID, types.NamespacedName{Namespace: v.Namespace, Name: v.Name}, SocketPath(r.PodsDir, pod))
	if err != nil {
		return err
	}
	cur.Status.VolumeStatus = res.VolumeStatus
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := c.Sync(callCtx, &launcherapi.SyncRequest{VMI: cur}); err != nil {
		return fmt.Errorf("sync hotplugged volumes of %s/%s to the launcher: %w", v.Namespace, v.Name, err)
	}
	log.FromContext(ctx).Info("synced hotplugged volumes to the launcher", "pod", pod.Name)
	return nil
}
