// Command virt-handler drives the virtual machines on one node through their launchers.
package main

import "github.com/d8virt/kubevirt-core/internal/scaffold"

func main() {
	scaffold.Main("virt-handler", "drives the virtual machines on one node through their launchers")
}
