package libvirtd

import (
	"fmt"
	"os"
	"path/filepath"
)

// Paths in these files are as the daemons see them, inside the instance's mount namespace.

const libvirtdConf = `# Written by hack/pkg/libvirtd; rewritten on every start.
# Only root reaches the sockets (they sit in a root-owned state directory), so no extra auth.
unix_sock_group = "root"
unix_sock_ro_perms = "0777"
unix_sock_rw_perms = "0770"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
`

const virtlogdConf = `# Written by hack/pkg/libvirtd; rewritten on every start.
log_outputs = "3:file:/var/log/libvirt/virtlogd.log"
`

// QEMU runs as root without relabelling: guest images live in caches under root's home, which
// libvirt-qemu cannot traverse, and chown-ing shared, read-only base images back and forth between
// guests would race. There is no systemd and maybe no usable cgroup hierarchy, and a container may
// forbid the private /dev namespace libvirt would build for QEMU, so both are off.
const qemuConf = `# Written by hack/pkg/libvirtd; rewritten on every start.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = []
cgroup_controllers = []
stdio_handler = "logd"
`

func writeConfig(state string) error {
	files := map[string]string{
		"libvirtd.conf": libvirtdConf,
		"virtlogd.conf": virtlogdConf,
		"qemu.conf":     qemuConf,
	}
	for name, content := range files {
		p := filepath.Join(state, "etc", name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("libvirtd: write %s: %w", p, err)
		}
	}
	return nil
}
