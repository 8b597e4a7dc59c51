// Package hotplug holds the rules of volume hotplug that every component shares: which volumes
// are hotpluggable, how an add or remove request checks against the volumes there are, and how it
// changes a VMI spec (the VM template's or the running VMI's). Pure functions only.
package hotplug

//lint:file-ignore ST1005 the messages are KubeVirt's, word for word: clients match on them.

import (
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Pluggable reports whether a volume was hotplugged (or may be unplugged): a PVC or DataVolume
// marked hotpluggable.
func Pluggable(v *kubevirtv1.Volume) bool {
	return (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.Hotpluggable) ||
		(v.DataVolume != nil && v.DataVolume.Hotpluggable)
}

// Volumes are the hotpluggable volumes of a VMI spec, in spec order.
func Volumes(spec *kubevirtv1.VirtualMachineInstanceSpec) []kubevirtv1.Volume {
	var out []kubevirtv1.Volume
	for i := range spec.Volumes {
		if Pluggable(&spec.Volumes[i]) {
			out = append(out, spec.Volumes[i])
		}
	}
	return out
}

// sourceName is the claim (or DataVolume) a hotplug source names.
func sourceName(s *kubevirtv1.HotplugVolumeSource) string {
	switch {
	case s == nil:
		return ""
	case s.DataVolume != nil:
		return s.DataVolume.Name
	case s.PersistentVolumeClaim != nil:
		return s.PersistentVolumeClaim.ClaimName
	}
	return ""
}

func usesSource(v *kubevirtv1.Volume, name string) bool {
	return name != "" && ((v.DataVolume != nil && v.DataVolume.Name == name) ||
		(v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name))
}

// Verify checks a request against the volumes it would change, with KubeVirt's messages: an
// added volume's name and source must be new; a removed one (by volume or claim name) must exist
// and be hotpluggable.
func Verify(volumes []kubevirtv1.Volume, req *kubevirtv1.VirtualMachineVolumeRequest) error {
	if add := req.AddVolumeOptions; add != nil {
		src := sourceName(add.VolumeSource)
		for i := range volumes {
			if volumes[i].Name == add.Name {
				return fmt.Errorf("Unable to add volume [%s] because volume with that name already exists", add.Name)
			}
			if usesSource(&volumes[i], src) {
				return fmt.Errorf("Unable to add volume source [%s] because it already exists", src)
			}
		}
		return nil
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		for i := range volumes {
			v := &volumes[i]
			if v.Name != rm.Name && !usesSource(v, rm.Name) {
				continue
			}
			if !Pluggable(v) {
				return fmt.Errorf("Unable to remove volume [%s] because it is not hotpluggable", v.Name)
			}
			return nil
		}
		return fmt.Errorf("Unable to remove volume [%s] because it does not exist", rm.Name)
	}
	return nil
}

// Queue appends req to the VM's pending requests as KubeVirt does: a second add of the same
// volume, or a remove while one is pending, is refused; a remove drops a pending add of the volume.
func Queue(pending []kubevirtv1.VirtualMachineVolumeRequest, req kubevirtv1.VirtualMachineVolumeRequest) ([]kubevirtv1.VirtualMachineVolumeRequest, error) {
	isAdd := func(r kubevirtv1.VirtualMachineVolumeRequest, name string) bool {
		return r.AddVolumeOptions != nil && r.AddVolumeOptions.Name == name
	}
	isRemove := func(r kubevirtv1.VirtualMachineVolumeRequest, name string) bool {
		return r.RemoveVolumeOptions != nil && r.RemoveVolumeOptions.Name == name
	}
	var out []kubevirtv1.VirtualMachineVolumeRequest
	switch {
	case req.AddVolumeOptions != nil:
		name := req.AddVolumeOptions.Name
		for _, r := range pending {
			if isAdd(r, name) {
				return nil, fmt.Errorf("add volume request for volume [%s] already exists", name)
			}
			if isRemove(r, name) {
				return nil, fmt.Errorf("unable to add volume since a remove volume request for volume [%s] already exists and is still being processed", name)
			}
		}
		out = append(out, pending...)
	case req.RemoveVolumeOptions != nil:
		name := req.RemoveVolumeOptions.Name
		for _, r := range pending {
			if isAdd(r, name) {
				continue
			}
			if isRemove(r, name) {
				return nil, fmt.Errorf("a remove volume request for volume [%s] already exists and is still being processed", name)
			}
			out = append(out, r)
		}
	}
	return append(out, req), nil
}

// Apply changes spec as the request says and reports whether it changed anything. An add puts
// the volume (hotpluggable) and its disk in unless they are there; a remove takes out the volume
// (by volume or claim name) and its disk. Applying a request twice changes nothing the second time.
func Apply(spec *kubevirtv1.VirtualMachineInstanceSpec, req *kubevirtv1.VirtualMachineVolumeRequest) bool {
	changed := false
	if add := req.AddVolumeOptions; add != nil && add.VolumeSource != nil {
		if !hasVolume(spec, add.Name) {
			v := kubevirtv1.Volume{Name: add.Name}
			switch src := add.VolumeSource; {
			case src.PersistentVolumeClaim != nil:
				pvc := *src.PersistentVolumeClaim.DeepCopy()
				pvc.Hotpluggable = true
				v.PersistentVolumeClaim = &pvc
			case src.DataVolume != nil:
				dv := *src.DataVolume.DeepCopy()
				dv.Hotpluggable = true
				v.DataVolume = &dv
			}
			spec.Volumes = append(spec.Volumes, v)
			changed = true
		}
		if !hasDisk(spec, add.Name) {
			d := kubevirtv1.Disk{Name: add.Name}
			if add.Disk != nil {
				d = *add.Disk.DeepCopy()
				d.Name = add.Name
			}
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, d)
			changed = true
		}
	}
	if rm := req.RemoveVolumeOptions; rm != nil {
		name := rm.Name
		var vols []kubevirtv1.Volume
		for i := range spec.Volumes {
			if spec.Volumes[i].Name == rm.Name || usesSource(&spec.Volumes[i], rm.Name) {
				name = spec.Volumes[i].Name
				changed = true
				continue
			}
			vols = append(vols, spec.Volumes[i])
		}
		spec.Volumes = vols
		var disks []kubevirtv1.Disk
		for _, d := range spec.Domain.Devices.Disks {
			if d.Name == name {
				changed = true
				continue
			}
			disks = append(disks, d)
		}
		spec.Domain.Devices.Disks = disks
	}
	return changed
}

func hasVolume(spec *kubevirtv1.VirtualMachineInstanceSpec, name string) bool {
	for _, v := range spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

func hasDisk(spec *kubevirtv1.VirtualMachineInstanceSpec, name string) bool {
	for _, d := range spec.Domain.Devices.Disks {
		if d.Name == name {
			return true
		}
	}
	return false
}

// Where hotplugged volumes travel, with KubeVirt's names.
const (
	// DisksVolume is the launcher Pod's emptyDir that virt-handler mounts hotplugged volumes into
	// (<volume>/ below it, a filesystem claim's directory; <volume> itself, a block claim's
	// device); the compute container sees it with HostToContainer propagation.
	DisksVolume = "hotplug-disks"
	// DisksDir is where the compute container mounts DisksVolume.
	DisksDir = "/var/run/kubevirt/hotplug-disks"
	// AttachmentPodLabel is the kubevirt.io label value of attachment Pods.
	AttachmentPodLabel = "hotplug-disk"
	// AttachmentPodPrefix starts the name of every attachment Pod.
	AttachmentPodPrefix = "hp-volume-"
	// AttachmentMountDir is where an attachment Pod's container mounts each claim (<volume>/).
	AttachmentMountDir = "/path"
	// AttachmentDeviceDir is where an attachment Pod's container has each block claim's device
	// (<volume>).
	AttachmentDeviceDir = "/dev/hotplug"
)

// ClaimName is the claim a hotpluggable volume uses (a DataVolume's claim has its name).
func ClaimName(v *kubevirtv1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.DataVolume != nil:
		return v.DataVolume.Name
	}
	return ""
}
