package rules

import "fmt"

// Direction says which way a name is mapped (see the package doc for the vocabulary). Every
// lookup takes one, and reads its input in the view the direction starts from.
type Direction uint8

const (
	// Rename goes from the component's view to the cluster's view (requests).
	Rename Direction = iota
	// Restore goes from the cluster's view to the component's view (responses).
	Restore
)

var _ fmt.Stringer = Rename

func (d Direction) String() string {
	if d == Rename {
		return "rename"
	}
	return "restore"
}

// From returns the names of the kind in the view d reads: Original for Rename, Renamed for
// Restore.
func (k *KindRule) From(d Direction) *Names {
	if d == Rename {
		return &k.Original
	}
	return &k.Renamed
}

// To returns the names of the kind in the view d writes: Renamed for Rename, Original for
// Restore.
func (k *KindRule) To(d Direction) *Names {
	if d == Rename {
		return &k.Renamed
	}
	return &k.Original
}
