package launcher

import (
	"fmt"

	"libvirt.org/go/libvirt"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// readVersions asks libvirt for the hypervisor's (QEMU's, for the qemu driver) and its own
// version.
func readVersions(conn *libvirt.Connect) (launcherapi.Versions, error) {
	qemu, err := conn.GetVersion()
	if err != nil {
		return launcherapi.Versions{}, fmt.Errorf("libvirt: hypervisor version: %w", err)
	}
	lib, err := conn.GetLibVersion()
	if err != nil {
		return launcherapi.Versions{}, fmt.Errorf("libvirt: library version: %w", err)
	}
	return launcherapi.Versions{QEMU: versionString(qemu), Libvirt: versionString(lib)}, nil
}

// versionString writes libvirt's version number (major * 1,000,000 + minor * 1,000 + release)
// as "major.minor.release".
func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}
