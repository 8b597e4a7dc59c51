package launcherapi

import "runtime"

// The node labeller's hand-off: virt-handler's Pod runs virt-launcher as an init container
// (--node-labeller-dir) that asks a libvirtd of its own what this node can offer guests and writes
// the answers into an emptyDir shared with the handler, which turns them into Node labels. The
// file names are KubeVirt's, so a captured directory of either reads the same.
const (
	// NodeLabellerVolume is the emptyDir of the handler Pod with the files.
	NodeLabellerVolume = "node-labeller"
	// NodeLabellerDir is where NodeLabellerVolume is mounted in both containers.
	NodeLabellerDir = "/var/lib/kubevirt-node-labeller"
	// DomCapabilitiesFile is `virsh domcapabilities --machine q35 --virttype T` for q35 guests.
	DomCapabilitiesFile = "virsh_domcapabilities.xml"
	// SupportedFeaturesFile is the host-model CPU with its features expanded
	// (`virsh hypervisor-cpu-baseline --features`).
	SupportedFeaturesFile = "supported_features.xml"
	// CapabilitiesFile is `virsh capabilities`: the host CPU's timer and the machine types.
	CapabilitiesFile = "capabilities.xml"
)

// Arch is libvirt's name of this machine's architecture, which the capabilities are asked and
// read for.
func Arch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}
