// Command virt-controller reconciles VirtualMachines, VirtualMachineInstances, replica sets and migrations.
package main

import "github.com/d8virt/kubevirt-core/internal/scaffold"

func main() {
	scaffold.Main("virt-controller", "reconciles VirtualMachines, VirtualMachineInstances, replica sets and migrations")
}
