package rewrite

import (
	"slices"
	"strings"
)

// A node describes how the walker treats a JSON value at a known place of an
// object. Values at places without a node are copied through untouched.
type node struct {
	kind   nodeKind
	fields map[string]*node // kObject
	elem   *node            // kArray, kMap
	role   role             // kString (and kMap keys)
	labels bool             // kMap: values are label values of the key
	filter bool             // kArray: elements may be hidden (dropped)
	// prescan: sibling fields read before walking a kObject
	pGroup, pKey, pKind, pRes string
	pGroups                   string // string array of groups (RBAC apiGroups)
	// ctxFallback: kinds/resources without a sibling group use the scope group
	ctxFallback bool
	custom      func(w *walker, n *node, sb *sib)
}

type nodeKind uint8

const (
	kRaw nodeKind = iota
	kObject
	kArray
	kMap
	kString
	kTop // a Kubernetes object: apiVersion/kind select the schema
	kCustom
)

type role uint8

const (
	rNone           role = iota
	rMetaKey             // label/annotation/finalizer key
	rLabelValue          // label value, key from sibling "key" or the map key
	rAPIVersion          // group/version; the group part is renamed
	rGroup               // bare API group
	rCtxGroup            // API group that sets the scope group and may hide the scope
	rCtxGroupVer         // group/version that sets the scope group
	rKind                // kind, group from sibling or scope
	rResource            // resource[/sub], group from sibling or scope
	rKindOrRes           // metav1.StatusDetails.kind: a kind or a resource
	rShortName           // short name, group from scope
	rCRDName             // plural.group
	rAPIServiceName      // version.group
	rWebhookPath         // webhook service path
	rMessage             // free text: qualified names are replaced
	rRBACResource        // resource of a policy rule, groups from sibling apiGroups
)

// sib holds sibling values read by prescan.
type sib struct {
	group     string
	hasGroup  bool
	groups    []string
	hasGroups bool
	key       string
	hasKey    bool
	kind      string
	res       string
}

// scope is one Kubernetes object (or one discovery entry) being walked.
type scope struct {
	group     string // source-view group from apiVersion
	hasGroup  bool
	kind      string
	hasKind   bool
	kindStart int // output position of a kind token waiting for its group
	kindEnd   int
	kindWait  bool
	ctxGroup  string
	hide      bool
	element   bool // an element of a filtering array
	schema    *node
}

type walker struct {
	scanner
	rw      *Rewriter
	dir     Direction
	scopes  []*scope
	target  Target
	lastTop *scope
}

func (w *walker) scope() *scope { return w.scopes[len(w.scopes)-1] }

func (w *walker) push(sc *scope) { w.scopes = append(w.scopes, sc) }
func (w *walker) pop()           { w.scopes = w.scopes[:len(w.scopes)-1] }

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
	if c, ok := n.fields[key]; ok {
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
	sb := parent
	if n.pGroup != "" || n.pKey != "" || n.pKind != "" || n.pRes != "" || n.pGroups != "" {
		sb = w.prescan(n)
	}
	w.eachKey(func(_, _ int, key string) {
		w.value(lookupField(n, key), sb)
	})
}

// prescan reads the sibling fields of the object at pos without consuming it.
func (w *walker) prescan(n *node) *sib {
	sb := &sib{}
	save := w.pos
	saveDepth := w.depth
	w.eachKey(func(_, _ int, key string) {
		w.ws()
		switch {
		case key == n.pGroup && n.pGroup != "":
			if w.peek() == '"' {
				_, _, v := w.str()
				if n.pGroup == "apiVersion" {
					v, _ = splitGV(v)
				}
				sb.group, sb.hasGroup = strings.Clone(v), true
				return
			}
		case key == n.pGroups && n.pGroups != "":
			if w.peek() == '[' {
				sb.hasGroups = true
				w.eachElem(func() {
					w.ws()
					if w.peek() == '"' {
						_, _, v := w.str()
						sb.groups = append(sb.groups, strings.Clone(v))
						return
					}
					w.skip()
				})
				return
			}
		case key == n.pKey && n.pKey != "":
			if w.peek() == '"' {
				_, _, v := w.str()
				sb.key, sb.hasKey = strings.Clone(v), true
				return
			}
		case key == n.pKind && n.pKind != "":
			if w.peek() == '"' {
				_, _, v := w.str()
				sb.kind = strings.Clone(v)
				return
			}
		case key == n.pRes && n.pRes != "":
			if w.peek() == '"' {
				_, _, v := w.str()
				sb.res = strings.Clone(v)
				return
			}
		}
		w.skip()
	})
	w.pos = save
	w.depth = saveDepth
	if !sb.hasGroup && n.pGroup == "apiVersion" {
		sb.hasGroup = true // no apiVersion: core group
	}
	return sb
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
		sc := &scope{element: true}
		w.push(sc)
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
		orig := key
		if n.role == rMetaKey {
			var nk string
			var ok bool
			if w.dir == Rename {
				nk, ok = w.rw.rules.RenameKey(key)
			} else {
				nk, ok = w.rw.rules.RestoreKey(key)
				if ok {
					orig = nk
				}
			}
			if ok {
				w.replaceString(ks, ke, nk)
			}
		}
		if n.labels && w.rw.rules.HasValueRules(orig) {
			w.ws()
			w.value(n.elem, &sib{key: key, hasKey: true})
			return
		}
		w.ws()
		w.skip()
	})
}

// top walks a Kubernetes object. inhGroup/inhKind come from an enclosing list
// or the request target and are used when the object has no apiVersion/kind.
func (w *walker) top(inhGroup, inhKind string, hasInh bool) {
	sc := &scope{group: inhGroup, hasGroup: hasInh, kind: inhKind, hasKind: hasInh && inhKind != ""}
	parent := w.scope()
	w.push(sc)
	ownGroup, ownKind := false, false
	w.eachKey(func(ks, ke int, key string) {
		w.ws()
		switch key {
		case "apiVersion":
			if w.peek() != '"' {
				break
			}
			s, e, v := w.str()
			g, ver := splitGV(v)
			sc.group, sc.hasGroup, ownGroup = strings.Clone(g), true, true
			if ng, ok := w.rw.group(w.dir, g); ok {
				w.replaceString(s, e, joinGV(ng, ver))
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
			sc.kind, sc.hasKind, sc.schema, ownKind = strings.Clone(v), true, nil, true
			if ownGroup {
				if nk, ok := w.rw.kind(w.dir, sc.group, v); ok {
					w.replaceString(s, e, nk)
				}
				return
			}
			w.flushTo(e)
			sc.kindStart, sc.kindEnd, sc.kindWait = len(w.out)-(e-s), len(w.out), true
			return
		default:
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

func (w *walker) spliceKind(sc *scope) {
	sc.kindWait = false
	if nk, ok := w.rw.kind(w.dir, sc.group, sc.kind); ok {
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
	w.top(sc.group, kind, sc.hasGroup && kind != "")
}

func splitGV(gv string) (string, string) {
	if i := strings.LastIndexByte(gv, '/'); i >= 0 {
		return gv[:i], gv[i+1:]
	}
	return "", gv
}

func joinGV(g, v string) string {
	if g == "" {
		return v
	}
	return g + "/" + v
}

// stringValue rewrites one string according to its role.
func (w *walker) stringValue(r role, sb *sib, n *node) {
	s, e, v := w.str()
	nv, ok := w.rewriteString(r, v, sb, n)
	if ok {
		w.replaceString(s, e, nv)
	}
}

func (w *walker) groupOf(sb *sib, n *node) (string, bool) {
	if sb != nil && sb.hasGroup && (sb.group != "" || !n.ctxFallback) {
		return sb.group, true
	}
	for i := len(w.scopes) - 1; i >= 0; i-- {
		if sc := w.scopes[i]; sc.ctxGroup != "" {
			return sc.ctxGroup, true
		}
	}
	return "", false
}

func (w *walker) rewriteString(r role, v string, sb *sib, n *node) (string, bool) {
	rw := w.rw
	rl := rw.rules
	d := w.dir
	switch r {
	case rMetaKey:
		if d == Rename {
			return rl.RenameKey(v)
		}
		return rl.RestoreKey(v)
	case rLabelValue:
		if sb == nil || !sb.hasKey {
			return v, false
		}
		key := sb.key
		if d == Restore {
			key, _ = rl.RestoreKey(key)
			return rl.RestoreLabelValue(key, v)
		}
		return rl.RenameLabelValue(key, v)
	case rAPIVersion:
		g, ver := splitGV(v)
		if ng, ok := rw.group(d, g); ok {
			return joinGV(ng, ver), true
		}
	case rGroup:
		return rw.group(d, v)
	case rCtxGroup, rCtxGroupVer:
		g, ver := v, ""
		if r == rCtxGroupVer {
			g, ver = splitGV(v)
		}
		sc := w.scope()
		sc.ctxGroup = strings.Clone(g)
		if d == Restore && rl.HiddenGroup(g) {
			sc.hide = true
		}
		if ng, ok := rw.group(d, g); ok {
			if r == rCtxGroupVer {
				return joinGV(ng, ver), true
			}
			return ng, true
		}
	case rKind:
		if g, ok := w.groupOf(sb, n); ok {
			return rw.kind(d, g, v)
		}
	case rResource:
		if g, ok := w.groupOf(sb, n); ok {
			return rw.resource(d, g, v)
		}
	case rKindOrRes:
		if g, ok := w.groupOf(sb, n); ok {
			if nv, ok := rw.resource(d, g, v); ok {
				return nv, true
			}
			return rw.kind(d, g, v)
		}
	case rShortName:
		if g, ok := w.groupOf(sb, n); ok {
			if d == Rename {
				return rl.RenameShortName(g, v)
			}
			return rl.RestoreShortName(g, v)
		}
	case rCRDName:
		return rw.crdName(d, v)
	case rAPIServiceName:
		if i := strings.IndexByte(v, '.'); i > 0 {
			if ng, ok := rw.group(d, v[i+1:]); ok {
				return v[:i+1] + ng, true
			}
		}
	case rWebhookPath:
		if d == Rename {
			return rl.RenameWebhookPath(v)
		}
		return rl.RestoreWebhookPath(v)
	case rMessage:
		return rw.message(d, v)
	case rRBACResource:
		if sb == nil || !sb.hasGroups {
			return v, false
		}
		for _, g := range sb.groups {
			if nv, ok := rw.resource(d, g, v); ok {
				return nv, true
			}
		}
	}
	return v, false
}

// crdName renames "plural.group".
func (rw *Rewriter) crdName(d Direction, v string) (string, bool) {
	i := strings.IndexByte(v, '.')
	if i <= 0 {
		return v, false
	}
	plural, g := v[:i], v[i+1:]
	ng, ok := rw.group(d, g)
	if !ok {
		return v, false
	}
	np, _ := rw.resource(d, g, plural)
	return np + "." + ng, true
}
