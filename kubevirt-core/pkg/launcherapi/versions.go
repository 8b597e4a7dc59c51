package launcherapi

// Versions are the hypervisor's versions a launcher runs its domain with, as libvirt reports
// them ("9.2.0"): the QEMU (libvirt's hypervisor version for the qemu driver) and libvirt's own.
type Versions struct {
	QEMU    string `json:"qemu,omitempty"`
	Libvirt string `json:"libvirt,omitempty"`
}

// The VMI annotations virt-handler keeps the launcher's Versions in (KubeVirt's VMI status has no
// field for them); the rewriter stores them under the renamed prefix.
const (
	AnnotationQEMUVersion    = "kubevirt.io/qemu-version"
	AnnotationLibvirtVersion = "kubevirt.io/libvirt-version"
)
