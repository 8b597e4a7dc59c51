package launcher

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/hotplug"
	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/converter"
)

// detachTimeout is how long an unplug may take: the guest has to release the device first.
const detachTimeout = 2 * time.Minute

// hotplugState is the hotplugged disks of the running domain; guarded by Manager.mu.
type hotplugState struct {
	// attached maps a volume name to its disk's target in the domain.
	attached map[string]string
	// detaching holds the volumes whose unplug the guest has not completed yet.
	detaching map[string]bool
	// failed maps a volume whose disk could not be attached to why; the next Sync tries again.
	failed map[string]string
}

// hotplugStatus lists the attached hotplugged volumes, by name. m.mu must be held.
func (m *Manager) hotplugStatus() []launcherapi.HotplugVolume {
	var out []launcherapi.HotplugVolume
	for name, target := range m.hp.attached {
		out = append(out, launcherapi.HotplugVolume{Name: name, Target: target})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// hotplugFailures lists the volumes whose last attach failed, by name. m.mu must be held.
func (m *Manager) hotplugFailures() []launcherapi.HotplugFailure {
	var out []launcherapi.HotplugFailure
	for name, msg := range m.hp.failed {
		out = append(out, launcherapi.HotplugFailure{Name: name, Message: msg})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// mountedHotplugVolumes are the VMI's hotplugged volumes virt-handler has brought into the Pod
// (volume status MountedToPod or Ready): those the domain may have.
func mountedHotplugVolumes(vmi *kubevirtv1.VirtualMachineInstance) map[string]*kubevirtv1.Volume {
	phase := map[string]kubevirtv1.VolumePhase{}
	for _, s := range vmi.Status.VolumeStatus {
		phase[s.Name] = s.Phase
	}
	out := map[string]*kubevirtv1.Volume{}
	for i := range vmi.Spec.Volumes {
		v := &vmi.Spec.Volumes[i]
		if p := phase[v.Name]; hotplug.Pluggable(v) && (p == kubevirtv1.HotplugVolumeMounted || p == kubevirtv1.VolumeReady) {
			out[v.Name] = v
		}
	}
	return out
}

// syncHotplug makes the running domain's hotplugged disks those of vmi: it attaches the disk of
// every volume virt-handler mounted into hotplug.DisksDir (a filesystem claim's disk.img,
// created as at start when the claim is empty) and detaches those no longer in the spec. Each
// Sync of virt-handler calls it; what is in place already is left alone. A disk that fails to
// attach does not fail the Sync: the failure is in the status (hotplugFailures) for virt-handler
// to report on the volume, the other volumes go on, and the next Sync tries again.
func (m *Manager) syncHotplug(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	m.mu.Lock()
	dom := m.dom
	if m.hp.attached == nil {
		m.hp = hotplugState{attached: map[string]string{}, detaching: map[string]bool{}, failed: map[string]string{}}
	}
	var attached []string
	for name := range m.hp.attached {
		attached = append(attached, name)
	}
	m.mu.Unlock()
	if dom == nil {
		return nil
	}
	want := mountedHotplugVolumes(vmi)
	inSpec := map[string]bool{}
	for _, v := range hotplug.Volumes(&vmi.Spec) {
		inSpec[v.Name] = true
	}
	changed := m.forgetFailures(want)
	for _, name := range attached {
		if inSpec[name] {
			continue
		}
		started, err := m.detachDisk(dom, name)
		if err != nil {
			return err
		}
		changed = changed || started
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m.mu.Lock()
		_, done := m.hp.attached[name]
		m.mu.Unlock()
		if done {
			continue
		}
		err := m.attachDisk(vmi, dom, want[name])
		m.mu.Lock()
		if err != nil {
			m.hp.failed[name] = err.Error()
		} else {
			delete(m.hp.failed, name)
		}
		m.mu.Unlock()
		if err != nil {
			m.log.Warn("hotplug failed", "volume", name, "err", err)
		}
		changed = true
	}
	if changed {
		m.pokeLoop()
	}
	return nil
}

// forgetFailures drops the failures of volumes that are no longer to be attached (unplugged, or
// no longer mounted) and reports whether there were any.
func (m *Manager) forgetFailures(want map[string]*kubevirtv1.Volume) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for name := range m.hp.failed {
		if want[name] == nil {
			delete(m.hp.failed, name)
			changed = true
		}
	}
	return changed
}

// attachDisk attaches the disk of a hotplugged volume to the running domain.
func (m *Manager) attachDisk(vmi *kubevirtv1.VirtualMachineInstance, dom *libvirt.Domain, v *kubevirtv1.Volume) error {
	// A block claim is its device, which virt-handler bound at <hotplug-disks>/<volume>; a
	// filesystem claim holds disk.img, made or grown (it is not in use yet) as at a start.
	var path string
	if launcherapi.BlockVolume(vmi, v.Name) {
		path = filepath.Join(hotplug.DisksDir, v.Name)
		if err := checkBlockDevice(path); err != nil {
			return fmt.Errorf("hotplug volume %s: %w", v.Name, err)
		}
	} else {
		var err error
		if path, _, _, err = preparePVCDisk(vmi, v, hotplug.DisksDir, true, dirBytesAvailable); err != nil {
			return fmt.Errorf("hotplug volume %s: %w", v.Name, err)
		}
	}
	used, err := diskTargets(dom)
	if err != nil {
		return err
	}
	disk, err := converter.HotplugDisk(vmi, v.Name, path, used)
	if err != nil {
		return invalidVMI(fmt.Errorf("hotplug volume %s: %w", v.Name, err))
	}
	xml, err := disk.Marshal()
	if err != nil {
		return fmt.Errorf("hotplug volume %s: %w", v.Name, err)
	}
	if err := dom.AttachDeviceFlags(xml, libvirt.DOMAIN_DEVICE_MODIFY_LIVE); err != nil {
		return fmt.Errorf("attach the disk of volume %s: %w", v.Name, err)
	}
	m.mu.Lock()
	m.hp.attached[v.Name] = disk.Target.Dev
	m.mu.Unlock()
	m.log.Info("hotplugged a disk", "volume", v.Name, "target", disk.Target.Dev, "file", filepath.Base(path))
	return nil
}

// detachDisk asks the guest to release the disk of a volume no longer in the spec and follows
// the unplug in the background: the volume leaves the status once the domain no longer has the
// disk, which tells virt-handler that it may unmount the volume. It reports whether it started.
func (m *Manager) detachDisk(dom *libvirt.Domain, name string) (bool, error) {
	m.mu.Lock()
	if m.hp.detaching[name] {
		m.mu.Unlock()
		return false, nil
	}
	m.hp.detaching[name] = true
	m.mu.Unlock()
	alias := converter.AliasPrefix + name
	if err := dom.DetachDeviceAlias(alias, libvirt.DOMAIN_DEVICE_MODIFY_LIVE); err != nil {
		m.mu.Lock()
		delete(m.hp.detaching, name)
		m.mu.Unlock()
		return false, fmt.Errorf("detach the disk of volume %s: %w", name, err)
	}
	m.log.Info("unplugging a disk", "volume", name)
	go func() {
		deadline := time.Now().Add(detachTimeout)
		for time.Now().Before(deadline) {
			has, err := hasDiskAlias(dom, alias)
			if err == nil && !has {
				m.mu.Lock()
				delete(m.hp.attached, name)
				delete(m.hp.detaching, name)
				m.mu.Unlock()
				m.log.Info("disk unplugged", "volume", name)
				m.pokeLoop()
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		// The guest kept the disk: a later Sync asks again.
		m.mu.Lock()
		delete(m.hp.detaching, name)
		m.mu.Unlock()
		m.log.Warn("the guest did not release a hotplugged disk", "volume", name)
	}()
	return true, nil
}

func domainDisks(dom *libvirt.Domain) ([]libvirtxml.DomainDisk, error) {
	x, err := dom.GetXMLDesc(0)
	if err != nil {
		return nil, fmt.Errorf("read the domain XML: %w", err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		return nil, fmt.Errorf("parse the domain XML: %w", err)
	}
	if d.Devices == nil {
		return nil, nil
	}
	return d.Devices.Disks, nil
}

// diskTargets are the target names of the domain's disks.
func diskTargets(dom *libvirt.Domain) ([]string, error) {
	disks, err := domainDisks(dom)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range disks {
		if d.Target != nil {
			out = append(out, d.Target.Dev)
		}
	}
	return out, nil
}

func hasDiskAlias(dom *libvirt.Domain, alias string) (bool, error) {
	disks, err := domainDisks(dom)
	if err != nil {
		return false, err
	}
	for _, d := range disks {
		if d.Alias != nil && d.Alias.Name == alias {
			return true, nil
		}
	}
	return false, nil
}
