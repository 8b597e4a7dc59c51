// Package v1alpha2 holds the Go types of the friendly virtualization.deckhouse.io/v1alpha2 API:
// the kinds users write with kubectl. The CRDs in crds/virtualization.deckhouse.io, the deep copies
// and the typed client under api/client are generated from these types (`make generate`).
//
// +kubebuilder:object:generate=true
// +groupName=virtualization.deckhouse.io
// +groupGoName=Virtualization
package v1alpha2
