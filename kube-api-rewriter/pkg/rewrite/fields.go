package rewrite

import (
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
