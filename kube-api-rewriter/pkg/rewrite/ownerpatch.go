package rewrite

import (
	"encoding/json"
	"regexp"
	"strconv"
)

// This file completes JSON patches that set one field of an owner reference on its own
// ("/metadata/ownerReferences/N/kind" or ".../apiVersion"). A kind is renamed with its group, and
// the group is in the sibling field, which such a patch does not carry: the object as the cluster
// holds it says what the sibling is. The patch is rewritten into one that carries both, with a
// test of the sibling value it was completed from, so that the apiserver refuses it when the
// object changed in between instead of storing a kind that does not exist in its group (the
// garbage collector would never delete the dependent then).

var ownerRefField = regexp.MustCompile(`^/metadata/ownerReferences/([0-9]+)/(kind|apiVersion)$`)

type patchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// ownerRefOps returns, by owner reference index, the string values the add and replace
// operations of a JSON patch set on the kind and apiVersion of that owner reference.
func ownerRefOps(ops []patchOp) map[int]*[2]*string {
	refs := map[int]*[2]*string{}
	for i := range ops {
		op := &ops[i]
		m := ownerRefField.FindStringSubmatch(op.Path)
		if m == nil || (op.Op != "add" && op.Op != "replace") {
			continue
		}
		var v string
		if json.Unmarshal(op.Value, &v) != nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if refs[n] == nil {
			refs[n] = &[2]*string{}
		}
		f := 0
		if m[2] == "apiVersion" {
			f = 1
		}
		refs[n][f] = &v
	}
	return refs
}

// JSONPatchNeedsObject reports whether a (component-view) JSON patch sets the kind or the
// apiVersion of an owner reference without the other, so that renaming it needs the object as
// the cluster holds it (JSONPatchWithObject).
func (rw *Rewriter) JSONPatchNeedsObject(body []byte) bool {
	var ops []patchOp
	if json.Unmarshal(body, &ops) != nil {
		return false // the walker reports what is wrong with it
	}
	for _, r := range ownerRefOps(ops) {
		if r[0] == nil || r[1] == nil {
			return true
		}
	}
	return false
}

// JSONPatchWithObject renames a component-view JSON patch of the object current (cluster view,
// as the apiserver answers a GET; nil when JSONPatchNeedsObject is false) for target t: as Patch,
// and an owner reference's kind set
// without its apiVersion is renamed in the group of the current apiVersion, and an apiVersion set
// without its kind brings the kind renamed into the new group, each with a test of the current
// sibling value. Owner references that current does not have are left as Patch leaves them.
func (rw *Rewriter) JSONPatchWithObject(body, current []byte, t Target) ([]byte, error) {
	renamed, err := rw.jsonPatch(Rename, body, t)
	if err != nil {
		return nil, err
	}
	var ops []patchOp
	if err := json.Unmarshal(renamed, &ops); err != nil {
		return nil, errorf("JSON patch: %v", err)
	}
	var cur struct {
		Metadata struct {
			OwnerReferences []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if current != nil {
		if err := json.Unmarshal(current, &cur); err != nil {
			return nil, errorf("current object: %v", err)
		}
	}
	owners := cur.Metadata.OwnerReferences
	refs := ownerRefOps(ops) // cluster view: apiVersions are renamed, kinds not yet
	out := make([]patchOp, 0, len(ops)+2)
	quote := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	for _, op := range ops {
		m := ownerRefField.FindStringSubmatch(op.Path)
		if m == nil || (op.Op != "add" && op.Op != "replace") {
			out = append(out, op)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		r := refs[n]
		var v string
		if json.Unmarshal(op.Value, &v) != nil {
			out = append(out, op)
			continue
		}
		if m[2] == "kind" && r[1] != nil {
			// The patch carries the apiVersion: rename the kind in its group.
			g, _ := splitGV(*r[1])
			out = append(out, withValue(op, quote(rw.kindIn(g, v))))
			continue
		}
		if n >= len(owners) || (m[2] == "apiVersion" && r[0] != nil) {
			out = append(out, op) // an apiVersion with its kind is renamed as it is
			continue
		}
		owner := owners[n]
		switch m[2] {
		case "kind":
			g, _ := splitGV(owner.APIVersion)
			out = append(out,
				patchOp{Op: "test", Path: "/metadata/ownerReferences/" + m[1] + "/apiVersion", Value: quote(owner.APIVersion)},
				withValue(op, quote(rw.kindIn(g, v))))
		case "apiVersion":
			out = append(out, op)
			og, _ := splitGV(owner.APIVersion)
			kind := owner.Kind
			if k, ok := rw.rules.Kind(Restore, og, owner.Kind); ok {
				kind = k
			}
			ng, _ := splitGV(v)
			if nk := rw.kindIn(ng, kind); nk != owner.Kind {
				out = append(out,
					patchOp{Op: "test", Path: "/metadata/ownerReferences/" + m[1] + "/kind", Value: quote(owner.Kind)},
					patchOp{Op: "replace", Path: "/metadata/ownerReferences/" + m[1] + "/kind", Value: quote(nk)})
			}
		}
	}
	return json.Marshal(out)
}

// kindIn returns the cluster's name of the component-view kind in the cluster-view group g.
func (rw *Rewriter) kindIn(g, kind string) string {
	og, ok := rw.rules.Group(Restore, g)
	if !ok {
		og = g
	}
	if nk, ok := rw.rules.Kind(Rename, og, kind); ok {
		return nk
	}
	return kind
}

func withValue(op patchOp, v json.RawMessage) patchOp {
	op.Value = v
	return op
}
