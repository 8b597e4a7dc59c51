// Package libvirtconf is the configuration of the libvirtd, virtlogd and QEMU driver that the
// launcher runs for itself. It is exported so that whatever else runs guests for this module can
// give them the same QEMU set-up.
//
// Paths in the files are as the daemons see them: inside a private mount namespace, where
// /etc/libvirt, /run/libvirt, /var/log/libvirt and friends belong to one daemon pair. The package
// uses nothing but the standard library, so hack builds it without cgo.
package libvirtconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// File names in the configuration directory (/etc/libvirt for the daemons).
const (
	LibvirtdConf = "libvirtd.conf"
	VirtlogdConf = "virtlogd.conf"
	QEMUConf     = "qemu.conf"
)

// Only root reaches the sockets (they sit in a root-owned, private /run/libvirt), so there is no
// extra authentication.
const libvirtdConf = `# Written by d8-virtualization (libvirtconf); rewritten on every start.
unix_sock_group = "root"
unix_sock_ro_perms = "0777"
unix_sock_rw_perms = "0770"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
`

const virtlogdConf = `# Written by d8-virtualization (libvirtconf); rewritten on every start.
log_outputs = "3:file:/var/log/libvirt/virtlogd.log"
`

// QEMU runs as root without relabelling: guest images may live where libvirt-qemu cannot traverse
// (caches under root's home, Pod volumes), and chown-ing shared, read-only base images back and
// forth between guests would race. There is no systemd and maybe no usable cgroup hierarchy, and a
// container may forbid the private /dev namespace libvirt would build for QEMU, so both are off.
// QEMU's stdout and stderr go through virtlogd, which keeps them in /var/log/libvirt/qemu.
const qemuConf = `# Written by d8-virtualization (libvirtconf); rewritten on every start.
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = []
cgroup_controllers = []
stdio_handler = "logd"
`

// Files maps each file name to its content.
func Files() map[string]string {
	return map[string]string{
		LibvirtdConf: libvirtdConf,
		VirtlogdConf: virtlogdConf,
		QEMUConf:     qemuConf,
	}
}

// Options vary the files per daemon.
type Options struct {
	// HostUUID is libvirtd's host_uuid. libvirt refuses to migrate a guest between two daemons
	// with the same one ("the same host"), and without it every daemon on a machine takes the
	// machine's SMBIOS UUID: launchers that migrate guests between each other on one machine (the
	// local nodes) each need their own. Empty leaves libvirt's default.
	HostUUID string
}

// Write (re)writes the three files into dir, which must exist. Other files there (a seeded copy
// of the image's /etc/libvirt) stay as they are.
func Write(dir string) error { return WriteOptions(dir, Options{}) }

// WriteOptions is Write with per-daemon options.
func WriteOptions(dir string, o Options) error {
	files := Files()
	if o.HostUUID != "" {
		if strings.ContainsAny(o.HostUUID, "\"\n\\") {
			return fmt.Errorf("libvirt config: host UUID %q", o.HostUUID)
		}
		files[LibvirtdConf] += fmt.Sprintf("host_uuid = %q\n", o.HostUUID)
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("libvirt config: write %s: %w", p, err)
		}
	}
	return nil
}
