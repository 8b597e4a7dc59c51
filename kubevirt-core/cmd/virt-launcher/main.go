// Command virt-launcher runs one virtual machine through libvirtd and QEMU.
package main

import "github.com/d8virt/kubevirt-core/internal/scaffold"

func main() { scaffold.Main("virt-launcher", "runs one virtual machine through libvirtd and QEMU") }
