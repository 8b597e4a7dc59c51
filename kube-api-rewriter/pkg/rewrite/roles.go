package rewrite

import "strings"

// This file rewrites one string by its role: the rules' lookups for groups, kinds, resources,
// keys and values, with the group a kind or resource belongs to taken from its siblings or the
// enclosing object.

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
