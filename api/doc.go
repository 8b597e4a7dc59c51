// Package api holds the names of the friendly virtualization.deckhouse.io API that every component
// shares, so that a group or kind is spelled in one place only.
package api

const (
	// Group is the API group of the user-facing kinds.
	Group = "virtualization.deckhouse.io"
	// Version is the version every user-facing kind is served in. It is the storage version of
	// all but VirtualMachineClass, which is stored as v1alpha3 (package core/v1alpha3).
	Version = "v1alpha2"
	// SubresourcesGroup is the aggregated API group that serves console, vnc and the other
	// subresources of the user-facing kinds.
	SubresourcesGroup = "subresources." + Group
	// Category lets `kubectl get virtualization` list every user-facing kind at once.
	Category = "virtualization"
)
