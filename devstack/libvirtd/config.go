package libvirtd

import (
	"fmt"
	"path/filepath"

	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/libvirtconf"
)

// writeConfig writes the launcher's libvirt configuration (the same QEMU set-up the launcher
// Pods use) into the instance's etc directory, which the daemons see as /etc/libvirt.
func writeConfig(state string) error {
	if err := libvirtconf.Write(filepath.Join(state, "etc")); err != nil {
		return fmt.Errorf("libvirtd: %w", err)
	}
	return nil
}
