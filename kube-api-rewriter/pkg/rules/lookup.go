package rules

import "strings"

// Lookups. Every mapping takes the Direction and a name in the view the direction reads, and
// returns ok=false (and its input) when the name is not changed. The returned string may share
// memory with the input.

// OriginalGroups returns the original group names in rule order.
func (r *Rules) OriginalGroups() []string { return append([]string(nil), r.ix().origGroups...) }

// RenamedGroups returns the renamed group names in rule order.
func (r *Rules) RenamedGroups() []string { return append([]string(nil), r.ix().renamedList...) }

// Kinds returns every kind rule in rule order.
func (r *Rules) Kinds() []*KindRule { return append([]*KindRule(nil), r.ix().kinds...) }

// IsOriginalGroup reports whether g is a listed original group (e.g. kubevirt.io).
func (r *Rules) IsOriginalGroup(g string) bool { _, ok := r.ix().dir[Rename].groups[g]; return ok }

// IsRuleKind reports whether kind (or list kind) is a kind of some rule group in the view
// direction d reads, whatever its group.
func (r *Rules) IsRuleKind(d Direction, kind string) bool {
	for _, gx := range r.ix().dir[d].groups {
		if _, ok := gx.kinds[kind]; ok {
			return true
		}
	}
	return false
}

// IsPassthroughGroup reports whether objects of group g are never touched (PassthroughGroups).
func (r *Rules) IsPassthroughGroup(g string) bool { return r.ix().passthrough[g] }

// IsRenamedGroup reports whether g is a renamed group (e.g. internal.virtualization.deckhouse.io).
func (r *Rules) IsRenamedGroup(g string) bool { _, ok := r.ix().dir[Restore].groups[g]; return ok }

// HiddenGroup reports whether the original group g must be hidden from the component.
func (r *Rules) HiddenGroup(g string) bool {
	gx, ok := r.ix().dir[Rename].groups[g]
	return ok && gx.hide
}

// splitPreserved returns how many preserved prefixes s starts with and the rest.
func (r *Rules) splitPreserved(s string) (int, string) {
	n := 0
	p := r.PreservedPrefix
	for strings.HasPrefix(s, p) {
		s = s[len(p):]
		n++
	}
	return n, s
}

// mayPreserve reports whether a name the tables do not map, and that starts with n preserved
// prefixes, can still stand for an original name found in the cluster (see the package doc):
// Restore prefixes every such name, Rename needs a prefix to strip.
func mayPreserve(d Direction, n int) bool { return n > 0 || d == Restore }

// preserve maps such a name: Rename strips one preserved prefix, Restore adds one.
func (r *Rules) preserve(d Direction, s string) string {
	if d == Rename {
		return s[len(r.PreservedPrefix):]
	}
	return r.PreservedPrefix + s
}

// Group maps an API group. Rename maps an original group to its renamed group, and a group
// carrying the preserved prefix loses one prefix; Restore maps a renamed group to its original
// group, and an original group found in the cluster gets the preserved prefix.
func (r *Rules) Group(d Direction, g string) (string, bool) {
	if g == "" {
		return g, false // the core group, the most frequent of all
	}
	ix := r.ix()
	if gx, ok := ix.dir[d].groups[g]; ok {
		return gx.to, true
	}
	if n, base := r.splitPreserved(g); mayPreserve(d, n) {
		if _, ok := ix.dir[Rename].groups[base]; ok {
			return r.preserve(d, g), true
		}
	}
	return g, false
}

// Kind maps (group, kind or list kind) to the kind in the other view.
func (r *Rules) Kind(d Direction, group, kind string) (string, bool) {
	gx, ok := r.ix().dir[d].groups[group]
	if !ok {
		return kind, false
	}
	if k, ok := gx.kinds[kind]; ok {
		return k.to, true
	}
	return kind, false
}

// LookupKind finds the rule of (group, kind or list kind).
func (r *Rules) LookupKind(d Direction, group, kind string) *KindRule {
	if gx, ok := r.ix().dir[d].groups[group]; ok {
		return gx.kinds[kind].rule
	}
	return nil
}

// LookupResource finds the rule of (group, plural or singular resource).
func (r *Rules) LookupResource(d Direction, group, resource string) *KindRule {
	if gx, ok := r.ix().dir[d].groups[group]; ok {
		return gx.resources[resource].rule
	}
	return nil
}

// Resource maps (group, resource) to the resource in the other view. The resource may be plural
// or singular and may carry a "/subresource" suffix (RBAC style); the subresource is kept.
func (r *Rules) Resource(d Direction, group, resource string) (string, bool) {
	gx, ok := r.ix().dir[d].groups[group]
	if !ok {
		return resource, false
	}
	base, sub := resource, ""
	if i := strings.IndexByte(resource, '/'); i >= 0 {
		base, sub = resource[:i], resource[i:]
	}
	if res, ok := gx.resources[base]; ok {
		if sub == "" {
			return res.to, true
		}
		return res.to + sub, true
	}
	return resource, false
}

// ShortName maps a short name of group to the short name in the other view.
func (r *Rules) ShortName(d Direction, group, s string) (string, bool) {
	if gx, ok := r.ix().dir[d].groups[group]; ok {
		if v, ok := gx.short[s]; ok {
			return v, true
		}
	}
	return s, false
}

// keyPrefix splits a metadata key into its prefix (the DNS part before '/', or
// the whole key when it has no '/') and the rest (starting at '/', or empty).
func keyPrefix(k string) (string, string) {
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i], k[i:]
	}
	return k, ""
}

// key maps a metadata key by its prefix rules alone.
func (dx *dirIndex) key(k string) (string, bool) {
	p, rest := keyPrefix(k)
	if to, ok := dx.exactKeys[p]; ok {
		return to + rest, true
	}
	for _, w := range dx.wildKeys {
		if len(p) > len(w.from) && strings.HasSuffix(p, w.from) {
			return p[:len(p)-len(w.from)] + w.to + rest, true
		}
	}
	return k, false
}

// IsOriginalKey reports whether a label/annotation/finalizer key uses an original prefix.
func (r *Rules) IsOriginalKey(k string) bool {
	_, ok := r.ix().dir[Rename].key(k)
	return ok
}

// Key maps a label, annotation or finalizer key.
func (r *Rules) Key(d Direction, k string) (string, bool) {
	if len(k) == 0 {
		return k, false
	}
	ix := r.ix()
	n, base := r.splitPreserved(k)
	if n == 0 {
		if v, ok := ix.dir[d].key(k); ok {
			return v, true
		}
	}
	if mayPreserve(d, n) {
		if _, ok := ix.dir[Rename].key(base); ok {
			return r.preserve(d, k), true
		}
	}
	return k, false
}

// HasValueRules reports whether label values of the original key k are renamed.
func (r *Rules) HasValueRules(k string) bool { return r.ix().valueKeys[k] }

// LabelValue maps the value v of the label whose original key is k. (Values of the rules never
// start with the preserved prefix, Load makes sure.)
func (r *Rules) LabelValue(d Direction, k, v string) (string, bool) {
	ix := r.ix()
	if !ix.valueKeys[k] {
		return v, false
	}
	n, base := r.splitPreserved(v)
	if n == 0 {
		if to, ok := ix.dir[d].values[[2]string{k, v}]; ok {
			return to, true
		}
	}
	if mayPreserve(d, n) {
		if _, ok := ix.dir[Rename].values[[2]string{k, base}]; ok {
			return r.preserve(d, v), true
		}
	}
	return v, false
}

// WebhookPath maps a webhook service path.
func (r *Rules) WebhookPath(d Direction, p string) (string, bool) {
	if v, ok := r.ix().dir[d].webhook[p]; ok {
		return v, true
	}
	return p, false
}
