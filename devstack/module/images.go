package module

// ImagePackages are the Go packages of the programs the module's images stand for on the local
// stack (the node agent runs image <registry>/<name>:<tag> as the program <name>), relative to a
// checkout's root.
var ImagePackages = []string{
	"./kube-api-rewriter/cmd/kube-api-rewriter", "./kubevirt-core/cmd/virt-operator", "./kubevirt-core/cmd/virt-api",
	"./kubevirt-core/cmd/virt-controller", "./kubevirt-core/cmd/virt-handler", "./kubevirt-core/cmd/virt-launcher",
	// The launcher image's second program: its Pod's init container copies it out for the
	// containerDisk containers.
	"./kubevirt-core/cmd/container-disk",
	"./virtualization-controller/cmd/virtualization-controller", "./virtualization-controller/cmd/importer",
	// The DVCR image's own program beside distribution's registry: its htpasswd init container.
	"./virtualization-controller/cmd/dvcr-htpasswd",
	"./virtualization-api/cmd/virtualization-api",
}
