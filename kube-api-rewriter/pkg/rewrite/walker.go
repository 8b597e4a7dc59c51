package rewrite

import "strings"

// This file holds the walker's state: the scopes of the objects being walked, the pooled
// per-walk records, and the memo of metadata key rewrites.

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
	rw     *Rewriter
	dir    Direction
	scopes []*scope
	target Target
	// itemOfKnownList tells the next top that it walks an item of a list whose group is the
	// items' (set by listItem, consumed by top).
	itemOfKnownList bool
	lastTop         *scope

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
	w.rw, w.dir, w.target, w.lastTop, w.itemOfKnownList = rw, d, t, nil, false
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
