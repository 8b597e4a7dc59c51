package rewrite

import "strings"

// This file walks JSON values by their node: objects (with the sibling values their fields
// need), arrays (with hidden elements dropped), and label and annotation maps.

// value walks the value at pos according to n.
func (w *walker) value(n *node, sb *sib) {
	w.ws()
	if n == nil {
		w.skip()
		return
	}
	c := w.peek()
	switch n.kind {
	case kObject:
		if c == '{' {
			w.object(n, sb)
			return
		}
	case kArray:
		if c == '[' {
			w.array(n, sb)
			return
		}
	case kMap:
		if c == '{' {
			w.mapValue(n)
			return
		}
	case kString:
		if c == '"' {
			w.stringValue(n.role, sb, n)
			return
		}
	case kTop:
		if c == '{' {
			w.top("", "", false)
			return
		}
	case kCustom:
		n.custom(w, n, sb)
		return
	}
	w.skip()
}

func (w *walker) enter() {
	w.depth++
	if w.depth > maxDepth {
		w.fail("nesting too deep")
	}
}

// eachKey iterates an object at pos, calling fn with the key; fn must consume
// the value (after the colon, whitespace not skipped).
func (w *walker) eachKey(fn func(ks, ke int, key string)) {
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
		ks, ke, key := w.str()
		w.ws()
		w.expect(':')
		fn(ks, ke, key)
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

func lookupField(n *node, key string) *node {
	if n.names != nil {
		for i, name := range n.names {
			if len(name) == len(key) && name == key {
				return n.kids[i]
			}
		}
	} else if c, ok := n.fields[key]; ok {
		return c
	}
	// strategic merge patch directives on lists
	if len(key) > 0 && key[0] == '$' {
		if r, ok := strings.CutPrefix(key, "$setElementOrder/"); ok {
			return n.fields[r]
		}
		if r, ok := strings.CutPrefix(key, "$deleteFromPrimitiveList/"); ok {
			return n.fields[r]
		}
	}
	return nil
}

func (w *walker) object(n *node, parent *sib) {
	if len(n.pkeys) == 0 {
		sb := parent
		if n.pGroup != "" || n.pKey != "" || n.pKind != "" || n.pRes != "" || n.pGroups != "" {
			sb = w.prescan(n) // a node index did not reach: read ahead first
		}
		w.eachKey(func(_, _ int, key string) {
			w.value(lookupField(n, key), sb)
		})
		if sb != parent {
			w.nsib--
		}
		return
	}
	// The sibling values (the group a kind belongs to, the key of label values) are read as
	// their keys go by: the apiserver writes them first (apiVersion before kind, key before
	// values). Only a value that needs them and comes before them makes the walker read the
	// object ahead (prescan). With a key given twice, the value read so far is the one used.
	start, startDepth := w.pos, w.depth
	sb := w.newSib()
	var seen uint8
	complete := false
	w.eachKey(func(_, _ int, key string) {
		child := lookupField(n, key)
		if !complete {
			for i, k := range n.pkeys {
				if k == key {
					w.ws()
					save := w.pos
					if w.prescanValue(n, sb, key) {
						w.pos = save
					}
					seen |= 1 << i
					complete = int(seen) == 1<<len(n.pkeys)-1
					break
				}
			}
			if !complete && child != nil {
				save, saveDepth := w.pos, w.depth
				w.pos, w.depth = start, startDepth
				w.prescanInto(n, sb)
				w.pos, w.depth = save, saveDepth
				complete = true
			}
		}
		w.value(child, sb)
	})
	w.nsib--
}

// prescan reads the sibling fields of the object at pos without consuming it. The values alias
// the input.
func (w *walker) prescan(n *node) *sib {
	sb := w.newSib()
	save, saveDepth := w.pos, w.depth
	w.prescanInto(n, sb)
	w.pos, w.depth = save, saveDepth
	return sb
}

// prescanInto reads the sibling fields of the object at pos into sb, from scratch.
func (w *walker) prescanInto(n *node, sb *sib) {
	*sb = sib{groups: sb.groups[:0]}
	w.eachKey(func(_, _ int, key string) {
		w.ws()
		if !w.prescanValue(n, sb, key) {
			w.skip()
		}
	})
	if !sb.hasGroup && n.pGroup == "apiVersion" {
		sb.hasGroup = true // no apiVersion: core group
	}
}

// prescanValue reads the value at pos of the sibling field key into sb, and reports whether it
// did (a value of another type is left for the caller).
func (w *walker) prescanValue(n *node, sb *sib, key string) bool {
	switch {
	case key == n.pGroup && key != "":
		if w.peek() == '"' {
			_, _, v := w.str()
			if n.pGroup == "apiVersion" {
				v, _ = splitGV(v)
			}
			sb.group, sb.hasGroup = v, true
			return true
		}
	case key == n.pGroups && key != "":
		if w.peek() == '[' {
			sb.hasGroups = true
			depth := w.depth
			w.eachElem(func() {
				w.ws()
				if w.peek() == '"' {
					_, _, v := w.str()
					sb.groups = append(sb.groups, v)
					return
				}
				w.skip()
			})
			w.depth = depth
			return true
		}
	case key == n.pKey && key != "":
		if w.peek() == '"' {
			_, _, v := w.str()
			sb.key, sb.hasKey = v, true
			return true
		}
	case key == n.pKind && key != "":
		if w.peek() == '"' {
			_, _, v := w.str()
			sb.kind = v
			return true
		}
	case key == n.pRes && key != "":
		if w.peek() == '"' {
			_, _, v := w.str()
			sb.res = v
			return true
		}
	}
	return false
}

func (w *walker) eachElem(fn func()) {
	w.enter()
	w.expect('[')
	w.ws()
	if w.peek() == ']' {
		w.pos++
		w.depth--
		return
	}
	for {
		fn()
		w.ws()
		switch w.peek() {
		case ',':
			w.pos++
		case ']':
			w.pos++
			w.depth--
			return
		default:
			w.fail("expected ',' or ']'")
		}
	}
}

func (w *walker) array(n *node, sb *sib) {
	if !n.filter {
		w.eachElem(func() { w.value(n.elem, sb) })
		return
	}
	// Filtering array: elements are emitted one by one; on Restore hidden ones
	// are dropped.
	w.enter()
	w.expect('[')
	w.flushTo(w.pos)
	w.ws()
	if w.peek() == ']' {
		w.pos++
		w.depth--
		return
	}
	kept := 0
	for {
		w.ws()
		mark := len(w.out)
		w.flushed = w.pos // drop whitespace and the comma before the element
		if kept > 0 {
			w.out = append(w.out, ',')
		}
		sc := w.push()
		sc.element = true
		w.value(n.elem, sb)
		w.pop()
		w.flushTo(w.pos)
		if sc.hide && w.dir == Restore {
			w.out = w.out[:mark]
		} else {
			kept++
		}
		w.ws()
		switch w.peek() {
		case ',':
			w.pos++
			w.flushed = w.pos
		case ']':
			w.flushed = w.pos
			w.pos++
			w.depth--
			return
		default:
			w.fail("expected ',' or ']'")
		}
	}
}

// mapValue walks a map whose keys are label/annotation keys.
func (w *walker) mapValue(n *node) {
	w.eachKey(func(ks, ke int, key string) {
		valueRules := false
		if n.role == rMetaKey {
			r := w.metaKey(key)
			if r.changed {
				w.replaceRaw(ks, ke, r.quoted)
			}
			valueRules = r.valueRules
		} else {
			valueRules = w.rw.rules.HasValueRules(key)
		}
		if n.labels && valueRules {
			w.ws()
			sb := w.newSib()
			sb.key, sb.hasKey = key, true
			w.value(n.elem, sb)
			w.nsib--
			return
		}
		w.ws()
		w.skip()
	})
}

// top walks a Kubernetes object. inhGroup/inhKind come from an enclosing list
