package launcher

import (
	"log/slog"
	"path/filepath"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// DefaultVolumeMountDir is where KubeVirt mounts the filesystem PVCs of a VMI, one directory per
// volume holding disk.img.
const DefaultVolumeMountDir = "/var/run/kubevirt-private/vmi-disks"

// Config is what the Manager needs besides the VMI.
type Config struct {
	// LibvirtURI is the libvirtd to run the domain on.
	LibvirtURI string
	// StateDir receives the VMI's disks, ISO and sockets. It must be visible to libvirtd and QEMU.
	StateDir string
	// ContainerDiskDir holds the sockets of the Pod's containerDisk containers
	// (containerdisk.Socket). Default containerdisk.Dir.
	ContainerDiskDir string
	// VolumeMountDir holds PVC volumes as <dir>/<volume>/disk.img. Default DefaultVolumeMountDir.
	VolumeMountDir string
	// Emulation forces TCG; without it TCG is used only when /dev/kvm is missing.
	Emulation bool
	// ResolvConf is the Pod's resolver configuration the guest's DHCP lease passes on. Default
	// /etc/resolv.conf.
	ResolvConf string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ConsoleSocket is the unix socket of the serial console of the VMI run with stateDir.
func ConsoleSocket(stateDir string) string {
	return filepath.Join(stateDir, launcherapi.SerialSocketName)
}

// VNCSocket is the unix socket of the VNC server of the VMI run with stateDir.
func VNCSocket(stateDir string) string { return filepath.Join(stateDir, launcherapi.VNCSocketName) }

// SerialLog holds everything the guest printed on its serial console.
func SerialLog(stateDir string) string { return filepath.Join(stateDir, "serial.log") }
