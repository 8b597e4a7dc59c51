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
	// names and kids are fields as two slices (see index): looking a key up among a few names
	// by length and bytes is cheaper than a map lookup, and the walker does it for every key.
	names  []string
	kids   []*node
	pkeys  []string // the distinct sibling fields among pGroup, pGroups, pKey, pKind, pRes
	elem   *node    // kArray, kMap
	role   role     // kString (and kMap keys)
	labels bool     // kMap: values are label values of the key
	filter bool     // kArray: elements may be hidden (dropped)
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
	ownKind   bool // the object names its kind itself
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

	// Walkers are pooled (Rewriter.walkers), and what a walk needs per object comes from
	// these, so that a list item or a watch event allocates nothing of its own.
	scopeArena []*scope // scopeArena[i] is reused for the scope at depth i
	sibs       []*sib   // prescan results, a stack that follows object nesting
	nsib       int
	keys       [2]map[string]keyResult // memo of metadata key rewrites, by direction
}

// keyResult is the memo of one metadata key (a label, annotation or finalizer key): what it is
// rewritten to, and whether the values of the label are rewritten too.
type keyResult struct {
	to          string
	quoted      []byte // to as a JSON string token, when changed
	changed     bool
	valueRules  bool
	valueRulesK string // the original key the value rules are looked up by
}

// maxKeyMemo bounds the memo: keys are few in practice, but they come from the cluster.
const maxKeyMemo = 2048

func (w *walker) scope() *scope { return w.scopes[len(w.scopes)-1] }

// push opens a scope at the next depth, reusing the arena's, and returns it zeroed.
func (w *walker) push() *scope {
	d := len(w.scopes)
	if d == len(w.scopeArena) {
		w.scopeArena = append(w.scopeArena, &scope{})
	}
	sc := w.scopeArena[d]
	*sc = scope{}
	w.scopes = append(w.scopes, sc)
	return sc
}

// pop closes the innermost scope. It stays readable until the next push.
func (w *walker) pop() { w.scopes = w.scopes[:len(w.scopes)-1] }

// reset prepares a pooled walker for a walk of src.
func (w *walker) reset(rw *Rewriter, d Direction, src, dst []byte, t Target) {
	w.rw, w.dir, w.target, w.lastTop = rw, d, t, nil
	w.src, w.pos, w.out, w.flushed, w.depth = src, 0, dst, 0, 0
	w.scopes = w.scopes[:0]
	w.nsib = 0
	w.push() // the root scope
}

// release drops what the walker holds of the walk's input and output before it goes back to
// the pool: the scopes and sibling values alias the input.
func (w *walker) release() {
	for _, sc := range w.scopeArena {
		*sc = scope{}
	}
	for _, sb := range w.sibs {
		*sb = sib{groups: sb.groups[:0]}
		clear(sb.groups[:cap(sb.groups)])
	}
	w.src, w.out, w.scopes, w.lastTop = nil, nil, w.scopes[:0], nil
}

// metaKey rewrites a metadata key through the memo.
func (w *walker) metaKey(key string) keyResult {
	m := w.keys[w.dir]
	if r, ok := m[key]; ok {
		return r
	}
	rl := w.rw.rules
	var r keyResult
	orig := key
	if r.to, r.changed = rl.Key(w.dir, key); r.changed && w.dir == Restore {
		orig = r.to
	}
	if r.valueRules = rl.HasValueRules(orig); r.valueRules {
		r.valueRulesK = orig
	}
	if m == nil || len(m) >= maxKeyMemo {
		m = make(map[string]keyResult, 64)
		w.keys[w.dir] = m
	}
	// The key may alias the input: the memo keeps its own copy, and so do its values.
	key = strings.Clone(key)
	if !r.changed {
		r.to = key
	} else {
		r.quoted = appendQuoted(nil, r.to)
	}
	if r.valueRules {
		r.valueRulesK = strings.Clone(r.valueRulesK)
	}
	m[key] = r
	return r
}

// newSib returns a zeroed sibling record from the stack; object releases it.
func (w *walker) newSib() *sib {
	if w.nsib == len(w.sibs) {
		w.sibs = append(w.sibs, &sib{})
	}
	sb := w.sibs[w.nsib]
	w.nsib++
	*sb = sib{groups: sb.groups[:0]}
	return sb
}

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
// or the request target and are used when the object has no apiVersion/kind.
func (w *walker) top(inhGroup, inhKind string, hasInh bool) {
	parent := w.scope()
	sc := w.push()
	sc.group, sc.hasGroup, sc.kind, sc.hasKind = inhGroup, hasInh, inhKind, hasInh && inhKind != ""
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
			sc.group, sc.hasGroup, ownGroup = g, true, true
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

// stringValue rewrites one string according to its role.
func (w *walker) stringValue(r role, sb *sib, n *node) {
	s, e, v := w.str()
	if r == rAPIVersion {
		// the most frequent rewrite of all (owner references, managed fields), without
		// building the new string
		g, ver := splitGV(v)
		if ng, ok := w.rw.rules.Group(w.dir, g); ok {
			w.replaceGV(s, e, ng, ver)
		}
		return
	}
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
		if w.keys[d] != nil {
			if r := w.metaKey(v); r.changed {
				return r.to, true
			}
			return v, false
		}
		return rl.Key(d, v)
	case rLabelValue:
		if sb == nil || !sb.hasKey {
			return v, false
		}
		key := sb.key
		if w.keys[d] != nil {
			// the memo knows whether the key has value rules, and its original name
			r := w.metaKey(key)
			if !r.valueRules {
				return v, false
			}
			return rl.LabelValue(d, r.valueRulesK, v)
		}
		if d == Restore {
			key, _ = rl.Key(d, key) // value rules are looked up by the original key
		}
		return rl.LabelValue(d, key, v)
	case rAPIVersion:
		g, ver := splitGV(v)
		if ng, ok := rl.Group(d, g); ok {
			return joinGV(ng, ver), true
		}
	case rGroup:
		return rl.Group(d, v)
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
		if ng, ok := rl.Group(d, g); ok {
			if r == rCtxGroupVer {
				return joinGV(ng, ver), true
			}
			return ng, true
		}
	case rKind:
		if g, ok := w.groupOf(sb, n); ok {
			return rl.Kind(d, g, v)
		}
	case rResource:
		if g, ok := w.groupOf(sb, n); ok {
			return rl.Resource(d, g, v)
		}
	case rKindOrRes:
		if g, ok := w.groupOf(sb, n); ok {
			if nv, ok := rl.Resource(d, g, v); ok {
				return nv, true
			}
			return rl.Kind(d, g, v)
		}
	case rShortName:
		if g, ok := w.groupOf(sb, n); ok {
			return rl.ShortName(d, g, v)
		}
	case rCRDName:
		return rw.crdName(d, v)
	case rAPIServiceName:
		if i := strings.IndexByte(v, '.'); i > 0 {
			if ng, ok := rl.Group(d, v[i+1:]); ok {
				return v[:i+1] + ng, true
			}
		}
	case rWebhookPath:
		return rl.WebhookPath(d, v)
	case rMessage:
		return rw.message(d, v)
	case rRBACResource:
		if sb == nil || !sb.hasGroups {
			return v, false
		}
		for _, g := range sb.groups {
			if nv, ok := rl.Resource(d, g, v); ok {
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
	ng, ok := rw.rules.Group(d, g)
	if !ok {
		return v, false
	}
	np, _ := rw.rules.Resource(d, g, plural)
	return np + "." + ng, true
}
