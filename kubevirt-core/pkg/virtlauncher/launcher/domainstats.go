package launcher

import (
	"fmt"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/domstats"
)

// DomainStats reads libvirt's counters of the running domain, its devices named after the VMI's.
func (m *Manager) DomainStats() (launcherapi.DomainStats, error) {
	dom, err := m.domain()
	if err != nil {
		return launcherapi.DomainStats{}, err
	}
	x, err := dom.GetXMLDesc(0)
	if err != nil {
		return launcherapi.DomainStats{}, statsError("read the domain XML", err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		return launcherapi.DomainStats{}, fmt.Errorf("parse the domain XML: %w", err)
	}
	all, err := m.conn.GetAllDomainStats([]*libvirt.Domain{dom}, domstats.Types, domstats.Flags)
	if err != nil {
		return launcherapi.DomainStats{}, statsError("domain statistics", err)
	}
	defer func() {
		for _, st := range all {
			_ = st.Domain.Free()
		}
	}()
	if len(all) != 1 {
		return launcherapi.DomainStats{}, fmt.Errorf("domain statistics: libvirt answered %d records for one domain", len(all))
	}
	return domstats.Convert(all[0], domstats.NamesOf(&d)), nil
}

// statsError is ErrFinished for a domain that went away meanwhile.
func statsError(what string, err error) error {
	if isNoDomain(err) {
		return ErrFinished
	}
	return fmt.Errorf("%s: %w", what, err)
}
