// Package v1alpha2 is the group subresources.virtualization.deckhouse.io/v1alpha2 that
// virtualization-api serves: the kinds its discovery names and the answer of a session probe.
// The group holds no objects of its own; its resources are the subresources of the friendly
// VirtualMachine (console, vnc, portforward, ...).
package v1alpha2
