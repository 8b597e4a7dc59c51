package rewrite

import (
	"bytes"
	"encoding/json"
	"strings"
)

// This file walks managedFields[].fieldsV1, the field sets of server-side apply. Their keys name
// fields: "f:NAME" a field or map key, "v:JSON" a member of a set list (finalizers), "k:{...}" a
// list element by its keys, "." the node itself. Under the maps and lists whose members are label,
// annotation or finalizer keys, those keys are renamed as the object's own are, at any depth (an
// object's metadata, a pod template's, selectors, node selectors), so that client-go's Extract*
// apply configurations and a client that sends managedFields back see the names of their view.

// keyedFields are the fields whose members are metadata keys: as "f:KEY" (maps) or "v:\"KEY\""
// (set lists).
var keyedFields = map[string]bool{
	"f:labels": true, "f:annotations": true, "f:finalizers": true,
	"f:matchLabels": true, "f:nodeSelector": true,
}

// fieldsSet walks a fieldsV1 object.
func (w *walker) fieldsSet(_ *node, _ *sib) {
	w.fieldsObject(false)
}

func (w *walker) fieldsObject(keyed bool) {
	if w.peek() != '{' {
		w.skip()
		return
	}
	if !keyed {
		// Most of a field set names no metadata keys (f:spec, f:status): one skip and a search
		// of its bytes are cheaper than walking it key by key.
		start, depth := w.pos, w.depth
		w.skip()
		if !hasKeyedField(w.src[start:w.pos]) {
			return
		}
		w.pos, w.depth = start, depth
	}
	w.eachKey(func(ks, ke int, key string) {
		w.ws()
		if keyed {
			w.fieldsKey(ks, ke, key)
			w.skip() // a member's own set ({} or {".":{}}) names no keys
			return
		}
		w.fieldsObject(keyedFields[key])
	})
}

var keyedFieldNames = func() [][]byte {
	var names [][]byte
	for k := range keyedFields {
		names = append(names, []byte(`"`+k+`"`))
	}
	return names
}()

// hasKeyedField reports whether a field set's bytes may hold one of keyedFields.
func hasKeyedField(b []byte) bool {
	for _, n := range keyedFieldNames {
		if bytes.Contains(b, n) {
			return true
		}
	}
	return false
}

// fieldsKey renames the metadata key in the field set key "f:KEY" or "v:\"KEY\"" at
// src[ks:ke]. An "f:" key is written without an allocation (the memo holds the renamed key): a
// list of pods carries a few in every item.
func (w *walker) fieldsKey(ks, ke int, key string) {
	switch {
	case strings.HasPrefix(key, "f:"):
		if r := w.metaKey(key[2:]); r.changed {
			w.flushTo(ks)
			w.out = append(appendEscaped(append(w.out, `"f:`...), r.to), '"')
			w.flushed = ke
		}
	case strings.HasPrefix(key, "v:\""):
		var v string
		if json.Unmarshal([]byte(key[2:]), &v) != nil {
			return // not a string member: nothing of ours
		}
		if r := w.metaKey(v); r.changed {
			w.replaceString(ks, ke, "v:"+string(appendQuoted(nil, r.to)))
		}
	}
}
