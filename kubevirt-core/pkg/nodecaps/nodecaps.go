// Package nodecaps reads what a node offers guests from the files virt-launcher's node labeller
// mode (--node-labeller-dir, the init container of virt-handler's Pod) writes with a libvirtd of
// its own: the files launcherapi.DomCapabilitiesFile, SupportedFeaturesFile and CapabilitiesFile
// name. virt-launcher writes them; virt-handler's node labeller reads them here and turns them
// into Node labels, and virt-launcher's tests read back what it wrote.
package nodecaps

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Capabilities is what the node offers guests, as far as the labels tell.
type Capabilities struct {
	// HostModel is the host-model CPU's model ("" when the hypervisor has none), Vendor its
	// vendor and RequiredFeatures the features it adds to the model.
	HostModel        string
	Vendor           string
	RequiredFeatures []string
	// UsableModels are the named CPU models a guest can get here, obsolete ones included.
	UsableModels []string
	// Features are the CPU features a guest can get (the host-model CPU, expanded).
	Features []string
	// TSC is the host's TSC counter, nil when libvirt reports none.
	TSC *libvirtxml.CapsHostCPUCounter
	// Machines are the machine types of the node's architecture, aliases included.
	Machines []string
	SEV      bool
	SEVES    bool
}

// Load reads the files in dir, for the machine architecture arch (libvirt's name, see
// launcherapi.Arch).
func Load(dir, arch string) (*Capabilities, error) {
	var files [3][]byte
	for i, name := range []string{launcherapi.DomCapabilitiesFile, launcherapi.SupportedFeaturesFile, launcherapi.CapabilitiesFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("node capabilities: %w", err)
		}
		files[i] = b
	}
	return Parse(files[0], files[1], files[2], arch)
}

// Parse reads the domain capabilities, the expanded host-model CPU and the host capabilities.
func Parse(domCaps, supportedFeatures, hostCaps []byte, arch string) (*Capabilities, error) {
	c := &Capabilities{}
	var dc libvirtxml.DomainCaps
	if err := dc.Unmarshal(string(domCaps)); err != nil {
		return nil, fmt.Errorf("parse %s: %w", launcherapi.DomCapabilitiesFile, err)
	}
	if dc.CPU != nil {
		for _, m := range dc.CPU.Modes {
			switch m.Name {
			case "host-model":
				if m.Supported != "yes" || len(m.Models) == 0 {
					continue
				}
				c.HostModel, c.Vendor = m.Models[0].Name, m.Vendor
				for _, f := range m.Features {
					if f.Policy == "require" {
						c.RequiredFeatures = append(c.RequiredFeatures, f.Name)
					}
				}
			case "custom":
				for _, model := range m.Models {
					// KubeVirt counts only models libvirt calls usable: "no" lacks features
					// here, and no verdict at all means libvirt could not tell.
					if model.Usable == "yes" {
						c.UsableModels = append(c.UsableModels, model.Name)
					}
				}
			}
		}
	}
	if dc.Features != nil && dc.Features.SEV != nil && dc.Features.SEV.Supported == "yes" {
		c.SEV = true
		c.SEVES = dc.Features.SEV.MaxESGuests > 0
	}

	var cpu libvirtxml.DomainCPU
	if err := cpu.Unmarshal(string(supportedFeatures)); err != nil {
		return nil, fmt.Errorf("parse %s: %w", launcherapi.SupportedFeaturesFile, err)
	}
	for _, f := range cpu.Features {
		if f.Policy == "require" {
			c.Features = append(c.Features, f.Name)
		}
	}

	var hc libvirtxml.Caps
	if err := hc.Unmarshal(string(hostCaps)); err != nil {
		return nil, fmt.Errorf("parse %s: %w", launcherapi.CapabilitiesFile, err)
	}
	if hc.Host.CPU != nil && hc.Host.CPU.Counter != nil && hc.Host.CPU.Counter.Name == "tsc" {
		c.TSC = hc.Host.CPU.Counter
	}
	for _, g := range hc.Guests {
		if g.Arch.Name != arch {
			continue
		}
		machines := g.Arch.Machines
		for _, d := range g.Arch.Domains {
			machines = append(machines, d.Machines...)
		}
		for _, m := range machines {
			if !slices.Contains(c.Machines, m.Name) {
				c.Machines = append(c.Machines, m.Name)
			}
		}
	}
	return c, nil
}
