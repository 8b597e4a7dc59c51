// Package capsdump writes what a libvirtd says this node offers guests, for virt-handler's node
// labeller: the q35 domain capabilities, the host-model CPU with its features expanded, and the
// host capabilities (see launcherapi.DomCapabilitiesFile and the files next to it).
package capsdump

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Machine is the machine type the capabilities are asked for: the one the core gives guests.
const Machine = "q35"

// VirtType is libvirt's domain type for the guests this node will run: "qemu" (TCG) when
// emulation is forced or KVM cannot be opened, else "kvm", as KubeVirt's labeller decides.
func VirtType(emulation bool, kvmDevice string) string {
	if emulation {
		return "qemu"
	}
	f, err := os.OpenFile(kvmDevice, os.O_RDWR, 0)
	if err != nil {
		return "qemu"
	}
	f.Close()
	return "kvm"
}

// Dump asks conn and writes the three files into dir. Each file is written under a temporary
// name and renamed, so a reader never sees half of one.
func Dump(conn *libvirt.Connect, dir, virtType string) error {
	arch := launcherapi.Arch()
	domCaps, err := conn.GetDomainCapabilities("", arch, Machine, virtType, 0)
	if err != nil {
		return fmt.Errorf("domain capabilities (%s, %s): %w", arch, virtType, err)
	}
	features, err := expandedHostModel(conn, domCaps, arch, virtType)
	if err != nil {
		return err
	}
	caps, err := conn.GetCapabilities()
	if err != nil {
		return fmt.Errorf("host capabilities: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("node labeller dir: %w", err)
	}
	for name, content := range map[string]string{
		launcherapi.DomCapabilitiesFile:   domCaps,
		launcherapi.SupportedFeaturesFile: features,
		launcherapi.CapabilitiesFile:      caps,
	} {
		if err := writeFile(filepath.Join(dir, name), content); err != nil {
			return err
		}
	}
	return nil
}

// errNoHostModel means the hypervisor offers no host-model CPU (some emulated architectures):
// there are no features to expand then.
var errNoHostModel = errors.New("no usable host-model CPU")

// expandedHostModel is the host-model CPU of domCaps as libvirt's baseline expands it: every
// feature it has, each with policy require (what `virsh hypervisor-cpu-baseline --features`
// prints for the domain capabilities).
func expandedHostModel(conn *libvirt.Connect, domCaps, arch, virtType string) (string, error) {
	cpu, err := hostModelCPU(domCaps)
	if errors.Is(err, errNoHostModel) {
		return "<cpu/>", nil
	}
	if err != nil {
		return "", err
	}
	out, err := conn.BaselineHypervisorCPU("", arch, Machine, virtType, []string{cpu}, libvirt.CONNECT_BASELINE_CPU_EXPAND_FEATURES)
	if err != nil {
		return "", fmt.Errorf("expand the host-model CPU: %w", err)
	}
	return out, nil
}

// hostModelCPU turns the host-model mode of the domain capabilities into a CPU definition.
func hostModelCPU(domCaps string) (string, error) {
	var caps libvirtxml.DomainCaps
	if err := caps.Unmarshal(domCaps); err != nil {
		return "", fmt.Errorf("parse domain capabilities: %w", err)
	}
	if caps.CPU == nil {
		return "", errNoHostModel
	}
	for _, m := range caps.CPU.Modes {
		if m.Name != "host-model" || m.Supported != "yes" || len(m.Models) == 0 {
			continue
		}
		cpu := libvirtxml.DomainCPU{
			Mode:  "custom",
			Match: "exact",
			Model: &libvirtxml.DomainCPUModel{Value: m.Models[0].Name, Fallback: "forbid"},
		}
		cpu.Vendor = m.Vendor
		for _, f := range m.Features {
			cpu.Features = append(cpu.Features, libvirtxml.DomainCPUFeature(f))
		}
		return cpu.Marshal()
	}
	return "", errNoHostModel
}

func writeFile(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
