// Package hotplug is virt-handler's part of volume hotplug: once virt-controller's attachment
// Pod holds a hotplugged claim on this node (volume phase AttachedToNode), it bind-mounts the
// claim's directory, or a block claim's device, into the launcher Pod's hotplug-disks volume
// (MountedToPod), the launcher
// attaches the disk to the domain (Ready). A volume gone from the spec is detached by the
// launcher first, then unmounted, and its status entry goes.
package hotplug

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Reasons virt-handler writes on hotplugged volumes. ReasonFailed is KubeVirt's reason for a
// hotplug that failed during a sync (FailedHotplugSync); the volume stays MountedToPod, as no
// phase of KubeVirt's says failed, and the message says why.
const (
	ReasonMounted = "VolumeMountedToPod"
	ReasonReady   = "VolumeReady"
	ReasonFailed  = "FailedHotplugSync"
)

// Volumes brings hotplugged volumes into launcher Pods on this node.
type Volumes struct {
	// Reader reads claims and their PersistentVolumes (past the cache: only get is granted).
	Reader client.Reader
	// PodsDir is the kubelet's pods directory as virt-handler sees it.
	PodsDir string
	// Mounter mounts on the node; nil means NodeMounter in DefaultHostMountNamespace.
	Mounter Mounter
}

func (h *Volumes) mounter() Mounter {
	if h.Mounter == nil {
		return NodeMounter{}
	}
	return h.Mounter
}

// Result is what Sync decided.
type Result struct {
	// VolumeStatus is the VMI's new volume status.
	VolumeStatus []kubevirtv1.VolumeStatus
	// LauncherSync asks for a Sync of the VMI (with VolumeStatus) to the launcher: a mounted
	// volume waits for its disk, or a removed one is still in the domain.
	LauncherSync bool
}

// Sync mounts and unmounts the VMI's hotplugged volumes in its running launcher Pod and
// returns their status. dom is the launcher's latest status.
func (h *Volumes) Sync(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, pod *corev1.Pod, dom *launcherapi.DomainStatus) (Result, error) {
	inDomain := map[string]string{}
	for _, v := range dom.HotplugVolumes {
		inDomain[v.Name] = v.Target
	}
	failed := map[string]string{}
	for _, f := range dom.HotplugFailures {
		failed[f.Name] = f.Message
	}
	res := Result{}
	spec := map[string]*kubevirtv1.Volume{}
	for _, v := range hotplug.Volumes(&vmi.Spec) {
		spec[v.Name] = &v
	}
	for name := range inDomain {
		if spec[name] == nil {
			// The launcher still has a disk the spec dropped: it detaches on Sync.
			res.LauncherSync = true
		}
	}
	dir := launcherapi.PodVolumeDir(h.PodsDir, string(pod.UID), hotplug.DisksVolume)
	var errs []error
	for _, s := range vmi.Status.VolumeStatus {
		s := *s.DeepCopy()
		v := spec[s.Name]
		switch {
		case v == nil && s.HotplugVolume == nil:
			// Not a hotplugged volume.
		case v == nil:
			if _, ok := inDomain[s.Name]; ok {
				s.Phase, s.Reason, s.Message = kubevirtv1.HotplugVolumeDetaching, "", fmt.Sprintf("Detaching volume %s from the VM", s.Name)
				break
			}
			if err := h.unmount(ctx, filepath.Join(dir, s.Name)); err != nil {
				errs = append(errs, err)
				break
			}
			continue // gone
		case s.Phase == kubevirtv1.HotplugVolumeAttachedToNode || s.Phase == kubevirtv1.HotplugVolumeMounted || s.Phase == kubevirtv1.VolumeReady:
			if err := h.mount(ctx, vmi.Namespace, v, filepath.Join(dir, s.Name)); err != nil {
				errs = append(errs, fmt.Errorf("volume %s: %w", s.Name, err))
				break
			}
			if target, ok := inDomain[s.Name]; ok {
				s.Phase, s.Reason, s.Target = kubevirtv1.VolumeReady, ReasonReady, target
				s.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", s.Name)
				break
			}
			s.Phase, s.Reason, s.Target = kubevirtv1.HotplugVolumeMounted, ReasonMounted, ""
			s.Message = fmt.Sprintf("Volume %s has been mounted in virt-launcher pod", s.Name)
			if msg, ok := failed[s.Name]; ok {
				// Retried with the reconcile's back-off: the error makes it come again.
				s.Reason, s.Message = ReasonFailed, fmt.Sprintf("Failed to attach hotplugged volume %s to VM: %s", s.Name, msg)
				errs = append(errs, fmt.Errorf("volume %s: the launcher failed to attach it: %s", s.Name, msg))
			}
			res.LauncherSync = true
		}
		res.VolumeStatus = append(res.VolumeStatus, s)
	}
	return res, errors.Join(errs...)
}

// mount binds the claim on target in the launcher's hotplug-disks volume, unless it is there
// already: a filesystem claim's directory on the directory target, a block claim's device on
// the file target.
func (h *Volumes) mount(ctx context.Context, namespace string, v *kubevirtv1.Volume, target string) error {
	m := h.mounter()
	if _, err := os.Lstat(target); err == nil {
		node, err := m.NodePath(target)
		if err != nil {
			return err
		}
		if ok, err := m.Mounted(node); err != nil || ok {
			return err
		}
	}
	src, block, err := h.claimSource(ctx, namespace, hotplug.ClaimName(v))
	if err != nil {
		return err
	}
	if block {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o640)
		if err != nil {
			return err
		}
		f.Close()
	} else if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	node, err := m.NodePath(target)
	if err != nil {
		return err
	}
	return m.Bind(ctx, src, node)
}

// unmount removes a volume's mount from the launcher and its directory.
func (h *Volumes) unmount(ctx context.Context, target string) error {
	m := h.mounter()
	if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	node, err := m.NodePath(target)
	if err != nil {
		return err
	}
	if ok, err := m.Mounted(node); err != nil {
		return err
	} else if ok {
		if err := m.Unmount(ctx, node); err != nil {
			return err
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// claimSource is where the bound claim's volume is on the node, and whether it is a block
// device: its hostPath or local PersistentVolume's path (the kinds the node serves claims from),
// a directory, or for volume mode Block the device (or a link to it).
func (h *Volumes) claimSource(ctx context.Context, namespace, claim string) (string, bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claim}, pvc); err != nil {
		return "", false, fmt.Errorf("claim %s: %w", claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", false, fmt.Errorf("claim %s is not bound", claim)
	}
	pv := &corev1.PersistentVolume{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", false, fmt.Errorf("volume %s of claim %s: %w", pvc.Spec.VolumeName, claim, err)
	}
	block := pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, block, nil
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, block, nil
	}
	return "", false, fmt.Errorf("volume %s: only hostPath and local volumes can be hotplugged here", pv.Name)
}
