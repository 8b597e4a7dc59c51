package rewrite

import (
	"bytes"
	"mime"
	"strings"

	"sigs.k8s.io/yaml"
)

// Patch content types.
const (
	ContentTypeJSONPatch      = "application/json-patch+json"
	ContentTypeMergePatch     = "application/merge-patch+json"
	ContentTypeStrategicMerge = "application/strategic-merge-patch+json"
	ContentTypeApplyYAML      = "application/apply-patch+yaml"
	ContentTypeApplyJSON      = "application/apply-patch+json"
	ContentTypeJSON           = "application/json"
)

// Patch rewrites a PATCH body chosen by its Content-Type (parameters are
// ignored). t is the patched object's kind in the input view (from the URL,
// see Rewriter.TargetFor).
//
//   - JSON patch: every op; paths (with ~0/~1 escapes) that go through label,
//     annotation or selector maps get their keys renamed; values (including the
//     values of "test" ops) are rewritten for the place the path points to;
//     "from" of move/copy too.
//   - merge patch, strategic merge patch (with $setElementOrder/…,
//     $deleteFromPrimitiveList/…, $patch, $retainKeys) and JSON apply patches:
//     rewritten like objects; null values stay null.
//   - YAML apply patch: converted to JSON and rewritten; the result is JSON,
//     which is valid YAML, so the Content-Type can stay.
func (rw *Rewriter) Patch(d Direction, contentType string, body []byte, t Target) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0])
	}
	switch strings.ToLower(mt) {
	case ContentTypeJSONPatch:
		if d == Rename && bytes.Contains(body, []byte("/ownerReferences/")) {
			// Owner reference fields set one by one are renamed together (ownerpatch.go).
			return rw.JSONPatchWithObject(body, nil, t)
		}
		return rw.jsonPatch(d, body, t)
	case ContentTypeMergePatch, ContentTypeStrategicMerge, ContentTypeApplyJSON, ContentTypeJSON:
		return rw.Object(d, body, t)
	case ContentTypeApplyYAML:
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, errorf("apply patch: %v", err)
		}
		return rw.Object(d, j, t)
	}
	return nil, ErrUnsupportedContentType
}

// jsonPatch rewrites an RFC 6902 JSON patch.
func (rw *Rewriter) jsonPatch(d Direction, body []byte, t Target) ([]byte, error) {
	return rw.run(d, nil, body, t, func(w *walker) {
		w.ws()
		if w.peek() != '[' {
			w.fail("JSON patch is not an array")
		}
		w.eachElem(func() {
			w.ws()
			if w.peek() != '{' {
				w.fail("JSON patch operation is not an object")
			}
			w.patchOp(t)
		})
	})
}

// patchOp rewrites one operation. It reads "path" first so the value can be
// rewritten whatever the key order is.
func (w *walker) patchOp(t Target) {
	save := w.pos
	var path string
	var hasPath bool
	w.eachKey(func(_, _ int, key string) {
		w.ws()
		if key == "path" && w.peek() == '"' {
			_, _, v := w.str()
			path, hasPath = strings.Clone(v), true
			return
		}
		w.skip()
	})
	w.pos = save
	var target pointerTarget
	if hasPath {
		target = w.resolvePointer(path, t)
	}
	w.eachKey(func(_, _ int, key string) {
		w.ws()
		switch key {
		case "path", "from":
			if w.peek() != '"' {
				break
			}
			s, e, v := w.str()
			pt := target
			if key == "from" {
				pt = w.resolvePointer(v, t)
			}
			if pt.newPath != v {
				w.replaceString(s, e, pt.newPath)
			}
			return
		case "value":
			if !hasPath {
				break
			}
			switch {
			case target.root:
				if w.peek() == '{' {
					w.top(t.Group, t.Kind, t.Kind != "")
					return
				}
			case target.labelKey != "":
				if w.peek() == '"' {
					s, e, v := w.str()
					if nv, ok := w.rewriteString(rLabelValue, v, &sib{key: target.labelKey, hasKey: true}, nil); ok {
						w.replaceString(s, e, nv)
					}
					return
				}
			default:
				w.value(target.n, target.sb)
				return
			}
		}
		w.skip()
	})
}

type pointerTarget struct {
	newPath  string
	n        *node
	sb       *sib
	root     bool
	labelKey string // the value is the label value of this (input-view) key
}

// resolvePointer renames the keys inside a JSON pointer and finds the schema
// node of the value it points to.
func (w *walker) resolvePointer(p string, t Target) pointerTarget {
	if p == "" {
		return pointerTarget{newPath: p, root: true}
	}
	if p[0] != '/' {
		return pointerTarget{newPath: p}
	}
	segs := strings.Split(p[1:], "/")
	cur := w.rw.schemaFor(t.Group, t.Kind)
	changed := false
	var res pointerTarget
	var sb *sib
	for i, raw := range segs {
		seg := unescapePointer(raw)
		last := i == len(segs)-1
		if cur == nil {
			break
		}
		switch cur.kind {
		case kObject:
			next := lookupField(cur, seg)
			if next == nil && seg == "items" && cur == w.rw.sch.generic {
				next = w.rw.sch.items
			}
			if cur.pKey != "" || cur.pGroup != "" || cur.pGroups != "" {
				sb = nil // sibling values are unknown in a pointer
			}
			cur = next
		case kArray:
			cur = cur.elem
			if cur != nil && cur.kind == kCustom { // list items
				cur = w.rw.sch.generic
			}
		case kMap:
			if cur.role == rMetaKey {
				nk, ok := w.rewriteString(rMetaKey, seg, nil, nil)
				if ok {
					segs[i] = escapePointer(nk)
					changed = true
				}
				if cur.labels && last {
					res.labelKey = seg
				}
			}
			cur = cur.elem
		case kTop:
			cur = w.rw.sch.generic
			next := lookupField(cur, seg)
			cur = next
		default:
			cur = nil
		}
	}
	if res.labelKey != "" {
		// handled by the caller with the key context
	} else if cur != nil && cur.kind == kTop {
		res.root = false
		res.n = cur
	} else {
		res.n = cur
	}
	res.sb = sb
	if changed {
		res.newPath = "/" + strings.Join(segs, "/")
	} else {
		res.newPath = p
	}
	return res
}

func unescapePointer(s string) string {
	if strings.IndexByte(s, '~') < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
