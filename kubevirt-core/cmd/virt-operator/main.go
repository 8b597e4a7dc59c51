// Command virt-operator installs and updates the core components from a KubeVirt resource.
package main

import "github.com/d8virt/kubevirt-core/internal/scaffold"

func main() {
	scaffold.Main("virt-operator", "installs and updates the core components from a KubeVirt resource")
}
