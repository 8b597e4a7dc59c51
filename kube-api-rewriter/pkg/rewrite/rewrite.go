// Package rewrite renames Kubernetes API payloads between the component's view
// (original names, e.g. kubevirt.io) and the cluster's view (renamed names, e.g.
// internal.virtualization.deckhouse.io), following a *rules.Rules.
//
// Every function is pure: it takes bytes (or strings) and returns new bytes; the
// input is never modified. JSON bodies are processed by a single-pass scanner
// that copies unchanged bytes in large chunks and only rewrites string tokens at
// known places (apiVersion, kind, label/annotation/finalizer keys, selectors,
// owner references, ...). Nothing is unmarshalled into Go values, so a 13 MB
// list costs one copy.
//
// Malformed JSON never panics: it is reported as a *SyntaxError, and the input
// is left as it was.
package rewrite

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// Direction of a rewrite: the rules' own, so that a rewrite passes it on to every lookup.
type Direction = rules.Direction

const (
	// Rename goes from the component's view to the cluster's view (requests).
	Rename = rules.Rename
	// Restore goes from the cluster's view to the component's view (responses).
	Restore = rules.Restore
)

// Target names the object kind a body is about when the body does not say it
// itself (patches, list items without apiVersion/kind). Group and Kind are in
// the view of the input (component view for Rename, cluster view for Restore).
// The zero Target means "unknown": only generic metadata is rewritten then.
type Target struct {
	Group string
	Kind  string
}

// Rewriter applies one rule set. It is immutable and safe for concurrent use.
type Rewriter struct {
	rules    *rules.Rules
	sch      *schemas
	messages [2]*strings.Replacer // by Direction
	walkers  sync.Pool            // *walker
}

// New returns a Rewriter for the given (loaded) rules.
func New(r *rules.Rules) *Rewriter {
	rw := &Rewriter{rules: r, sch: buildSchemas()}
	rw.walkers.New = func() any { return &walker{} }
	rw.buildMessageReplacers()
	return rw
}

// Rules returns the rules of the rewriter.
func (rw *Rewriter) Rules() *rules.Rules { return rw.rules }

// message replaces qualified names in free text (Status messages). Restore
// replaces every renamed name (groups, kinds, resources, key prefixes); Rename
// only replaces qualified names ("resource.group", "Kind.group") and groups in
// "group/version" form, because bare original kinds are ambiguous.
func (rw *Rewriter) message(d Direction, s string) (string, bool) {
	ns := rw.messages[d].Replace(s)
	return ns, ns != s
}

func (rw *Rewriter) buildMessageReplacers() {
	type pair struct{ from, to string }
	var ps [2][]pair // by Direction
	r := rw.rules
	for _, k := range r.Kinds() {
		o, n := k.Original, k.Renamed
		ps[Restore] = append(ps[Restore],
			pair{n.Plural + "." + n.Group, o.Plural + "." + o.Group},
			pair{n.Kind + "." + n.Group, o.Kind + "." + o.Group},
			pair{n.ListKind, o.ListKind}, pair{n.Kind, o.Kind},
			pair{n.Plural, o.Plural}, pair{n.Singular, o.Singular})
		ps[Rename] = append(ps[Rename],
			pair{o.Plural + "." + o.Group, n.Plural + "." + n.Group},
			pair{o.Kind + "." + o.Group, n.Kind + "." + n.Group})
	}
	for _, g := range r.Groups {
		rn, _ := r.Group(Rename, g.Name)
		ps[Restore] = append(ps[Restore], pair{rn + "/", g.Name + "/"}, pair{rn, g.Name})
		ps[Rename] = append(ps[Rename], pair{g.Name + "/", rn + "/"})
	}
	for _, p := range r.MetadataPrefixes {
		if !strings.HasPrefix(p.From, "*") {
			ps[Restore] = append(ps[Restore], pair{p.To + "/", p.From + "/"})
		}
	}
	for d, ps := range ps {
		sort.SliceStable(ps, func(i, j int) bool { return len(ps[i].from) > len(ps[j].from) })
		var args []string
		seen := map[string]bool{}
		for _, p := range ps {
			if seen[p.from] {
				continue
			}
			seen[p.from] = true
			args = append(args, p.from, p.to)
		}
		rw.messages[d] = strings.NewReplacer(args...)
	}
}

func (w *walker) categories(_ *node, sb *sib) {
	if w.peek() != '[' || sb == nil {
		w.skip()
		return
	}
	g, ok := w.groupOf(sb, &node{ctxFallback: true})
	if !ok {
		w.skip()
		return
	}
	res := sb.res
	if i := strings.IndexByte(res, '/'); i >= 0 {
		w.skip() // a subresource has no categories of its own
		return
	}
	r := w.rw.rules
	kr := r.LookupKind(w.dir, g, sb.kind)
	if kr == nil {
		kr = r.LookupResource(w.dir, g, res)
	}
	start := w.pos
	w.skip()
	if kr == nil {
		return
	}
	cats := kr.To(w.dir).Categories
	buf := []byte{'['}
	for i, c := range cats {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendQuoted(buf, c)
	}
	buf = append(buf, ']')
	w.replaceRaw(start, w.pos, buf)
}

func (w *walker) admissionPatch(_ *node, _ *sib) {
	if w.peek() != '"' {
		w.skip()
		return
	}
	s, e, v := w.str()
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		w.pos = s
		w.fail("admission response patch is not base64: " + err.Error())
	}
	np, err := w.rw.jsonPatch(w.dir, raw, w.target)
	if err != nil {
		w.pos = s
		w.fail("admission response patch: " + err.Error())
	}
	w.replaceString(s, e, base64.StdEncoding.EncodeToString(np))
}

// run executes fn over src with panics converted to errors.
func (rw *Rewriter) run(d Direction, dst, src []byte, t Target, fn func(w *walker)) (out []byte, err error) {
	w := rw.walkers.Get().(*walker)
	if dst == nil {
		dst = make([]byte, 0, len(src)+len(src)/8+64)
	}
	w.reset(rw, d, src, dst, t)
	defer func() {
		if p := recover(); p != nil {
			se, ok := p.(scanError)
			if !ok {
				panic(p)
			}
			out, err = nil, se.err
		}
		w.release()
		rw.walkers.Put(w)
	}()
	fn(w)
	w.ws()
	if w.pos != len(src) {
		w.fail("unexpected data after the JSON value")
	}
	w.flushTo(len(src))
	return w.out, nil
}

// Object rewrites any Kubernetes JSON document: an object, a List of any kind,
// a Status, a Table, discovery documents, CRDs and AdmissionReviews. t is used
// when the document has no apiVersion/kind (pass Target{} when unknown). On
// Restore, list items of hidden original groups (CRDs, discovery) are dropped.
func (rw *Rewriter) Object(d Direction, body []byte, t Target) ([]byte, error) {
	return rw.AppendObject(d, nil, body, t)
}

// AppendObject is Object appending to dst.
func (rw *Rewriter) AppendObject(d Direction, dst, body []byte, t Target) ([]byte, error) {
	return rw.run(d, dst, body, t, func(w *walker) {
		w.ws()
		if w.peek() != '{' {
			w.skip()
			return
		}
		w.top(t.Group, t.Kind, t.Kind != "")
	})
}

// Rename is Object(Rename, body, Target{}).
func (rw *Rewriter) Rename(body []byte) ([]byte, error) { return rw.Object(Rename, body, Target{}) }

// Restore is Object(Restore, body, Target{}).
func (rw *Rewriter) Restore(body []byte) ([]byte, error) { return rw.Object(Restore, body, Target{}) }

// WatchEvent rewrites one watch event {"type":...,"object":...} appending to
// dst. drop is true when the event is about an object hidden from the
// component (Restore only); out is then dst unchanged. ERROR events carry a
// Status and BOOKMARK events a bare object; both are handled.
func (rw *Rewriter) WatchEvent(d Direction, dst, event []byte, t Target) (out []byte, drop bool, err error) {
	var hidden bool
	mark := len(dst)
	out, err = rw.run(d, dst, event, t, watchEvent(d, t, &hidden))
	if err != nil {
		return dst[:mark], false, err
	}
	if hidden {
		return out[:mark], true, nil
	}
	return out, false, nil
}

// WatchEventPrefix is WatchEvent for the event at the start of buf, as a watch stream is read:
// buf may end inside the event, or hold the start of the next ones. It returns how many bytes of
// buf the event took (whitespace before it included). short reports that buf ends inside the
// event: nothing is rewritten then, and the caller reads on and calls again with more.
func (rw *Rewriter) WatchEventPrefix(d Direction, dst, buf []byte, t Target) (out []byte, n int, drop, short bool, err error) {
	var hidden bool
	mark := len(dst)
	out, n, short, err = rw.walkPrefix(d, dst, buf, true, watchEvent(d, t, &hidden))
	switch {
	case short || err != nil:
		return dst[:mark], 0, false, short, err
	case hidden:
		return out[:mark], n, true, false, nil
	}
	return out, n, false, false, nil
}

// watchEvent walks one watch event; hidden is set when the event is about a hidden object.
func watchEvent(d Direction, t Target, hidden *bool) func(w *walker) {
	return func(w *walker) {
		w.ws()
		if w.peek() != '{' {
			w.fail("watch event is not an object")
		}
		sc := w.push()
		sc.element = true
		w.eachKey(func(_, _ int, key string) {
			w.ws()
			if key == "object" && w.peek() == '{' {
				w.top(t.Group, t.Kind, t.Kind != "")
				return
			}
			w.skip()
		})
		w.pop()
		*hidden = sc.hide && d == Restore
	}
}

// AdmissionReview rewrites an AdmissionReview: on Restore the request (kind,
// resource, requestKind, requestResource, object, oldObject), on Rename the
// response patch (base64 JSON patch, rewritten for target t, the request's
// kind in the component view) and status message.
func (rw *Rewriter) AdmissionReview(d Direction, body []byte, t Target) ([]byte, error) {
	return rw.run(d, nil, body, t, func(w *walker) {
		w.ws()
		if w.peek() != '{' {
			w.fail("AdmissionReview is not an object")
		}
		w.top("admission.k8s.io", "AdmissionReview", true)
	})
}

// ErrUnsupportedContentType is returned by Patch for unknown patch types.
var ErrUnsupportedContentType = errors.New("rewrite: unsupported content type")

func errorf(format string, a ...any) error { return fmt.Errorf("rewrite: "+format, a...) }
