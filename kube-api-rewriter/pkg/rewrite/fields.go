package rewrite

import (
	"encoding/json"
	"strings"
	"unsafe"
)

// This file walks managedFields[].fieldsV1, the field sets of server-side apply. Their keys name
// fields: "f:NAME" a field or map key, "v:JSON" a member of a set list (finalizers), "k:{...}" a
// list element by its keys, "." the node itself. A field set is walked along the schema of the
// object it belongs to, so that wherever the object holds label, annotation or finalizer keys
// (its metadata, a pod template's, selectors, node selectors), the field set's keys for them are
// renamed as the object's own are: client-go's Extract* apply configurations and a client that
// sends managedFields back then see the names of their view. Everything off the schema is
// skipped in one pass.

// fieldsSet walks a fieldsV1 object of the object in the current scope.
func (w *walker) fieldsSet(_ *node, _ *sib) {
	n := w.scope().schema
	if n == nil {
		n = w.rw.sch.generic
	}
	w.fieldsOf(n)
}

// fieldsOf walks the field set at pos of a value described by n.
func (w *walker) fieldsOf(n *node) {
	if n == nil || w.peek() != '{' {
		w.skip()
		return
	}
	switch {
	case n.kind == kObject:
		w.eachFieldKey(func(_, _ int, key string, _ bool) {
			if f, ok := strings.CutPrefix(key, "f:"); ok {
				w.fieldsOf(lookupField(n, f))
				return
			}
			w.skip()
		})
	case n.kind == kMap && n.role == rMetaKey:
		w.eachFieldKey(func(ks, ke int, key string, esc bool) {
			if esc {
				key = w.decodedKey(ks, ke)
			}
			if k, ok := strings.CutPrefix(key, "f:"); ok {
				if r := w.metaKey(k); r.changed {
					// Written without an allocation (the memo holds the renamed key): a list of
					// pods carries a few in every item.
					w.flushTo(ks)
					w.out = append(appendEscaped(append(w.out, `"f:`...), r.to), '"')
					w.flushed = ke
				}
			}
			w.skip()
		})
	case n.kind == kArray && n.elem != nil && n.elem.kind == kString && n.elem.role == rMetaKey:
		w.eachFieldKey(func(ks, ke int, key string, esc bool) {
			if esc {
				key = w.decodedKey(ks, ke)
			}
			if v, ok := strings.CutPrefix(key, "v:"); ok {
				var s string
				if json.Unmarshal([]byte(v), &s) == nil {
					if r := w.metaKey(s); r.changed {
						w.replaceString(ks, ke, "v:"+string(appendQuoted(nil, r.to)))
					}
				}
			}
			w.skip()
		})
	case n.kind == kArray && n.elem != nil && n.elem.kind == kObject:
		w.eachFieldKey(func(_, _ int, key string, _ bool) {
			if strings.HasPrefix(key, "k:") || strings.HasPrefix(key, "i:") {
				w.fieldsOf(n.elem)
				return
			}
			w.skip()
		})
	default:
		w.skip()
	}
}

// eachFieldKey is eachKey without decoding keys: field set keys of list elements ("k:{\"uid\":...}")
// are full of escapes, and only their prefix matters. key is the raw key (esc reports escapes in
// it); fn is called with pos at the value, whitespace skipped, and must consume it.
func (w *walker) eachFieldKey(fn func(ks, ke int, key string, esc bool)) {
	w.enter()
	w.expect('{')
	w.ws()
	if w.peek() == '}' {
		w.pos++
		w.depth--
		return
	}
	for {
		w.ws()
		if w.peek() != '"' {
			w.fail("expected string")
		}
		ks := w.pos
		ke, esc := w.stringAt(ks)
		raw := w.src[ks+1 : ke-1]
		w.pos = ke
		w.ws()
		w.expect(':')
		w.ws()
		fn(ks, ke, unsafe.String(unsafe.SliceData(raw), len(raw)), esc)
		w.ws()
		switch w.peek() {
		case ',':
			w.pos++
		case '}':
			w.pos++
			w.depth--
			return
		default:
			w.fail("expected ',' or '}'")
		}
	}
}

// decodedKey decodes the key src[ks:ke], which has escapes.
func (w *walker) decodedKey(ks, ke int) string {
	save := w.pos
	w.pos = ks
	_, _, key := w.str()
	w.pos = save
	return key
}
