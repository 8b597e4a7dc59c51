// Package v1alpha3 holds the kinds of virtualization.deckhouse.io/v1alpha3: VirtualMachineClass,
// whose core fractions are percentages ("5%") where v1alpha2 has integers. v1alpha3 is the storage
// version; package conversion converts between the two. The parts that do not differ are
// v1alpha2's types.
//
// +kubebuilder:object:generate=true
// +groupName=virtualization.deckhouse.io
// +groupGoName=Virtualization
package v1alpha3
