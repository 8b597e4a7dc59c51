// Package vmip is IP address management: every VirtualMachine gets a VirtualMachineIPAddress
// (its own, or the one it names), and every address is held by a cluster-scoped
// VirtualMachineIPAddressLease named after it, whose creation is the lock. Three reconcilers:
// the machines' implicit addresses (vm.go), the addresses and their leases (vmip.go), and the
// leases' release and retention (lease.go). The decisions are pure (decide.go).
package vmip

import (
	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// EventSource is the controllers' name in the events they record.
const EventSource = "virtualmachineipaddress-controller"

// LabelVirtualMachineName marks the address created for a machine with the machine's name.
const LabelVirtualMachineName = "virtualization.deckhouse.io/virtual-machine-name"

// AnnotationCNIIPAddress is the Pod annotation a CNI honours to give the Pod that address, as
// the reference module's Cilium does. The internal VM's template carries it, so KubeVirt puts it
// on the VMI and the launcher Pod; on the local stack the node agent honours it.
const AnnotationCNIIPAddress = "cni.cilium.io/ipAddress"

// IndexLeaseByRef is the cache index of leases by the address that holds them, "namespace/name".
const IndexLeaseByRef = "spec.virtualMachineIPAddressRef"

// AddressName is the VirtualMachineIPAddress a machine uses: the one it names, or the one
// created for it, named after the machine (as the reference module names it).
func AddressName(vm *v1alpha2.VirtualMachine) string {
	if vm.Spec.VirtualMachineIPAddressName != "" {
		return vm.Spec.VirtualMachineIPAddressName
	}
	return vm.Name
}

// LeaseRefKey is the index key of a lease: the namespace/name of its address, "" for a released
// lease.
func LeaseRefKey(l *v1alpha2.VirtualMachineIPAddressLease) string {
	if l.Spec.VirtualMachineIPAddressRef == nil {
		return ""
	}
	return l.Spec.VirtualMachineIPAddressRef.Namespace + "/" + l.Spec.VirtualMachineIPAddressRef.Name
}

// AddressKey is the index key of the leases an address holds.
func AddressKey(vmip *v1alpha2.VirtualMachineIPAddress) string {
	return vmip.Namespace + "/" + vmip.Name
}

// HeldBy says whether lease names vmip as its holder.
func HeldBy(l *v1alpha2.VirtualMachineIPAddressLease, vmip *v1alpha2.VirtualMachineIPAddress) bool {
	return l != nil && LeaseRefKey(l) == AddressKey(vmip)
}
