package rewrite

import (
	"slices"
	"strings"
)

// This file walks Kubernetes objects: apiVersion and kind pick the schema of the rest, list items
// inherit the list's group and kind.

// or the request target and are used when the object has no apiVersion/kind.
func (w *walker) top(inhGroup, inhKind string, hasInh bool) {
	parent := w.scope()
	sc := w.push()
	sc.group, sc.hasGroup, sc.kind, sc.hasKind = inhGroup, hasInh, inhKind, hasInh && inhKind != ""
	ownGroup, ownKind, checked := false, false, false
	// A list item of a known list (not a v1 List of any kinds) is in the list's group: no need
	// to read ahead for its apiVersion.
	groupKnown := hasInh || w.itemOfKnownList
	w.itemOfKnownList = false
	start := w.pos
	w.eachKey(func(ks, ke int, key string) {
		w.ws()
		switch key {
		case "apiVersion":
			if w.peek() != '"' {
				break
			}
			s, e, v := w.str()
			g, ver := splitGV(v)
			sc.group, sc.hasGroup, ownGroup = g, true, true
			if w.rw.rules.IsPassthroughGroup(g) {
				return
			}
			if ng, ok := w.rw.rules.Group(w.dir, g); ok {
				w.replaceGV(s, e, ng, ver)
			}
			if sc.kindWait {
				w.spliceKind(sc)
			}
			return
		case "kind":
			if w.peek() != '"' {
				break
			}
			s, e, v := w.str()
			sc.kind, sc.hasKind, sc.schema, ownKind, sc.ownKind = v, true, nil, true, true
			if ownGroup && w.rw.rules.IsPassthroughGroup(sc.group) {
				return
			}
			if ownGroup {
				if nk, ok := w.rw.rules.Kind(w.dir, sc.group, v); ok {
					w.replaceString(s, e, nk)
				}
				return
			}
			w.flushTo(e)
			sc.kindStart, sc.kindEnd, sc.kindWait = len(w.out)-(e-s), len(w.out), true
			return
		default:
			if !ownGroup && !groupKnown && !checked {
				// An apiVersion after other fields (an object written by hand): read it first, as
				// an object of a passthrough group must not be touched at all.
				checked = true
				if g, ok := w.aheadGroup(start); ok && w.rw.rules.IsPassthroughGroup(g) {
					sc.group, sc.hasGroup = g, true
				}
			}
			if sc.hasGroup && w.rw.rules.IsPassthroughGroup(sc.group) {
				break
			}
			if sc.schema == nil {
				sc.schema = w.rw.schemaFor(sc.group, sc.kind)
			}
			child := lookupField(sc.schema, key)
			// Until the body names its own kind, an inherited one is the kind of the items (the
			// request path's): custom-resource lists come with sorted keys, items before kind.
			if key == "items" && child == nil && (!ownKind || sc.kind == "" || strings.HasSuffix(sc.kind, "List")) {
				child = w.rw.sch.items
			}
			w.value(child, nil)
			return
		}
		w.skip()
	})
	if sc.kindWait && hasInh {
		w.spliceKind(sc)
	}
	w.pop()
	w.lastTop = sc
	if sc.hide && parent != nil && parent.element {
		parent.hide = true
	}
}

// aheadGroup reads the group of the apiVersion of the object that starts at start, without
// consuming anything.
func (w *walker) aheadGroup(start int) (string, bool) {
	save, saveDepth := w.pos, w.depth
	w.pos, w.depth = start, saveDepth-1
	g, found := "", false
	w.eachKey(func(_, _ int, key string) {
		w.ws()
		if key == "apiVersion" && !found && w.peek() == '"' {
			_, _, v := w.str()
			g, _ = splitGV(v)
			found = true
			return
		}
		w.skip()
	})
	w.pos, w.depth = save, saveDepth
	return g, found
}

func (w *walker) spliceKind(sc *scope) {
	sc.kindWait = false
	if nk, ok := w.rw.rules.Kind(w.dir, sc.group, sc.kind); ok {
		w.out = slices.Replace(w.out, sc.kindStart, sc.kindEnd, appendQuoted(nil, nk)...)
	}
}

// listItems walks the items of a list; items inherit the list's group and kind.
func (w *walker) listItem() {
	var sc *scope
	for i := len(w.scopes) - 1; i >= 0; i-- {
		if !w.scopes[i].element {
			sc = w.scopes[i]
			break
		}
	}
	kind := strings.TrimSuffix(sc.kind, "List")
	if kind == sc.kind {
		kind = ""
	}
	// Only a v1 List holds objects of any group. (A list whose kind comes after its items is
	// taken as one of its group: the apiserver never answers with a v1 List, and reading every
	// item ahead would double the work.)
	w.itemOfKnownList = sc.hasGroup && sc.kind != "List"
	w.top(sc.group, kind, sc.hasGroup && kind != "")
}

func splitGV(gv string) (string, string) {
	if i := strings.LastIndexByte(gv, '/'); i >= 0 {
		return gv[:i], gv[i+1:]
	}
	return "", gv
}

// replaceGV replaces the string token src[start:end] by joinGV(g, v).
func (w *walker) replaceGV(start, end int, g, v string) {
	if g == "" {
		w.replaceString(start, end, v)
		return
	}
	w.flushTo(start)
	w.out = append(appendEscaped(append(w.out, '"'), g), '/')
	w.out = append(appendEscaped(w.out, v), '"')
	w.flushed = end
}

func joinGV(g, v string) string {
	if g == "" {
		return v
	}
	return g + "/" + v
}
