package vm

import (
	"fmt"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// The kinds of block devices.
const (
	KindVirtualDisk         v1alpha2.BlockDeviceKind = "VirtualDisk"
	KindVirtualImage        v1alpha2.BlockDeviceKind = "VirtualImage"
	KindClusterVirtualImage v1alpha2.BlockDeviceKind = "ClusterVirtualImage"
)

// DiskDevice resolves a VirtualDisk (nil: not found): ready once its PersistentVolumeClaim is
// named and its phase is Ready, or WaitForFirstConsumer (the claim binds when the VM's Pod is
// scheduled: waiting for Ready would wait forever).
func DiskDevice(ref v1alpha2.BlockDeviceSpecRef, vd *v1alpha2.VirtualDisk) Device {
	d := Device{Ref: ref}
	switch {
	case vd == nil:
		d.Reason = fmt.Sprintf("VirtualDisk %s not found", ref.Name)
	case (vd.Status.Phase != v1alpha2.DiskReady && vd.Status.Phase != v1alpha2.DiskWaitForFirstConsumer) || vd.Status.Target.PersistentVolumeClaimName == "":
		d.Reason = fmt.Sprintf("VirtualDisk %s is not ready (phase %q)", ref.Name, vd.Status.Phase)
	default:
		d.Ready, d.ClaimName, d.Size = true, vd.Status.Target.PersistentVolumeClaimName, vd.Status.Capacity
	}
	return d
}

// VirtualImageDevice resolves a VirtualImage (nil: not found): its container disk in DVCR or its
// PersistentVolumeClaim, read-only, a CD-ROM for an ISO.
func VirtualImageDevice(ref v1alpha2.BlockDeviceSpecRef, vi *v1alpha2.VirtualImage) Device {
	if vi == nil {
		return Device{Ref: ref, Reason: fmt.Sprintf("VirtualImage %s not found", ref.Name)}
	}
	return imageDevice(ref, &vi.Status.ImageStatus, vi.Status.Target.RegistryURL, vi.Status.Target.PersistentVolumeClaimName)
}

// ClusterVirtualImageDevice resolves a ClusterVirtualImage (nil: not found): its container disk
// in DVCR, read-only, a CD-ROM for an ISO.
func ClusterVirtualImageDevice(ref v1alpha2.BlockDeviceSpecRef, cvi *v1alpha2.ClusterVirtualImage) Device {
	if cvi == nil {
		return Device{Ref: ref, Reason: fmt.Sprintf("ClusterVirtualImage %s not found", ref.Name)}
	}
	return imageDevice(ref, &cvi.Status.ImageStatus, cvi.Status.Target.RegistryURL, "")
}

func imageDevice(ref v1alpha2.BlockDeviceSpecRef, st *v1alpha2.ImageStatus, registryURL, claim string) Device {
	d := Device{Ref: ref, ReadOnly: true, CDROM: st.CDROM, Size: st.Size.Unpacked}
	switch {
	case st.Phase != v1alpha2.ImageReady || (registryURL == "" && claim == ""):
		d.Reason = fmt.Sprintf("%s %s is not ready (phase %q)", ref.Kind, ref.Name, st.Phase)
	case registryURL != "":
		d.Ready, d.Image = true, registryURL
	default:
		d.Ready, d.ClaimName = true, claim
	}
	return d
}
