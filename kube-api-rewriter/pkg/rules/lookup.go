package rules

import "strings"

// Lookups. Every function returns ok=false (and its input) when the name is not
// changed. The returned string may share memory with the input.

// OriginalGroups returns the original group names in rule order.
func (r *Rules) OriginalGroups() []string { return append([]string(nil), r.ix().origGroups...) }

// RenamedGroups returns the renamed group names in rule order.
func (r *Rules) RenamedGroups() []string { return append([]string(nil), r.ix().renamedList...) }

// Kinds returns every kind rule in rule order.
func (r *Rules) Kinds() []*KindRule { return append([]*KindRule(nil), r.ix().kinds...) }

// IsOriginalGroup reports whether g is a listed original group (e.g. kubevirt.io).
func (r *Rules) IsOriginalGroup(g string) bool { _, ok := r.ix().groups[g]; return ok }

// IsRenamedGroup reports whether g is a renamed group (e.g. internal.virtualization.deckhouse.io).
func (r *Rules) IsRenamedGroup(g string) bool { _, ok := r.ix().renamedGroups[g]; return ok }

// HiddenGroup reports whether the original group g must be hidden from the component.
func (r *Rules) HiddenGroup(g string) bool {
	gx, ok := r.ix().groups[g]
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

// RenameGroup maps an original group to its renamed group. A group carrying the
// preserved prefix loses one prefix (see the package doc).
func (r *Rules) RenameGroup(g string) (string, bool) {
	ix := r.ix()
	if gx, ok := ix.groups[g]; ok {
		return gx.renamed, true
	}
	if n, base := r.splitPreserved(g); n > 0 {
		if _, ok := ix.groups[base]; ok {
			return g[len(r.PreservedPrefix):], true
		}
	}
	return g, false
}

// RestoreGroup maps a renamed group to its original group; an original group
// found in the cluster gets the preserved prefix.
func (r *Rules) RestoreGroup(g string) (string, bool) {
	ix := r.ix()
	if gx, ok := ix.renamedGroups[g]; ok {
		return gx.orig, true
	}
	if _, base := r.splitPreserved(g); ix.groups[base] != nil {
		return r.PreservedPrefix + g, true
	}
	return g, false
}

// RenameKind maps (original group, kind or list kind) to the renamed kind.
func (r *Rules) RenameKind(group, kind string) (string, bool) {
	gx, ok := r.ix().groups[group]
	if !ok {
		return kind, false
	}
	if k, ok := gx.kinds[kind]; ok {
		if k.isList {
			return k.rule.Renamed.ListKind, true
		}
		return k.rule.Renamed.Kind, true
	}
	return kind, false
}

// RestoreKind maps (renamed group, renamed kind or list kind) to the original kind.
func (r *Rules) RestoreKind(group, kind string) (string, bool) {
	gx, ok := r.ix().renamedGroups[group]
	if !ok {
		return kind, false
	}
	if k, ok := gx.renamedKinds[kind]; ok {
		if k.isList {
			return k.rule.Original.ListKind, true
		}
		return k.rule.Original.Kind, true
	}
	return kind, false
}

// LookupKind finds the rule of (original group, kind); list kinds match too.
func (r *Rules) LookupKind(group, kind string) *KindRule {
	if gx, ok := r.ix().groups[group]; ok {
		return gx.kinds[kind].rule
	}
	return nil
}

// LookupRenamedKind finds the rule of (renamed group, renamed kind).
func (r *Rules) LookupRenamedKind(group, kind string) *KindRule {
	if gx, ok := r.ix().renamedGroups[group]; ok {
		return gx.renamedKinds[kind].rule
	}
	return nil
}

// LookupResource finds the rule of (original group, plural or singular resource).
func (r *Rules) LookupResource(group, resource string) *KindRule {
	if gx, ok := r.ix().groups[group]; ok {
		return gx.resources[resource]
	}
	return nil
}

// LookupRenamedResource finds the rule of (renamed group, renamed plural or singular).
func (r *Rules) LookupRenamedResource(group, resource string) *KindRule {
	if gx, ok := r.ix().renamedGroups[group]; ok {
		return gx.renamedResources[resource]
	}
	return nil
}

// RenameResource maps (original group, resource) to the renamed resource. The
// resource may be plural or singular and may carry a "/subresource" suffix
// (RBAC style); the subresource is kept.
func (r *Rules) RenameResource(group, resource string) (string, bool) {
	gx, ok := r.ix().groups[group]
	if !ok {
		return resource, false
	}
	base, sub := resource, ""
	if i := strings.IndexByte(resource, '/'); i >= 0 {
		base, sub = resource[:i], resource[i:]
	}
	if _, ok := gx.resources[base]; ok {
		return r.Renamed.ResourcePrefix + base + sub, true
	}
	return resource, false
}

// RestoreResource maps (renamed group, renamed resource[/sub]) to the original.
func (r *Rules) RestoreResource(group, resource string) (string, bool) {
	gx, ok := r.ix().renamedGroups[group]
	if !ok {
		return resource, false
	}
	base, sub := resource, ""
	if i := strings.IndexByte(resource, '/'); i >= 0 {
		base, sub = resource[:i], resource[i:]
	}
	if _, ok := gx.renamedResources[base]; ok {
		return base[len(r.Renamed.ResourcePrefix):] + sub, true
	}
	return resource, false
}

// RenameShortName maps an original short name of group to the renamed one.
func (r *Rules) RenameShortName(group, s string) (string, bool) {
	if gx, ok := r.ix().groups[group]; ok {
		if v, ok := gx.short[s]; ok {
			return v, true
		}
	}
	return s, false
}

// RestoreShortName maps a renamed short name of a renamed group back.
func (r *Rules) RestoreShortName(group, s string) (string, bool) {
	if gx, ok := r.ix().renamedGroups[group]; ok {
		if v, ok := gx.renamedShort[s]; ok {
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

func (ix *index) renameKeyPlain(k string) (string, bool) {
	p, rest := keyPrefix(k)
	if to, ok := ix.exactFrom[p]; ok {
		return to + rest, true
	}
	for _, w := range ix.wildFrom {
		if len(p) > len(w.from) && strings.HasSuffix(p, w.from) {
			return p[:len(p)-len(w.from)] + w.to + rest, true
		}
	}
	return k, false
}

func (ix *index) restoreKeyPlain(k string) (string, bool) {
	p, rest := keyPrefix(k)
	if from, ok := ix.exactTo[p]; ok {
		return from + rest, true
	}
	for _, w := range ix.wildTo {
		if len(p) > len(w.to) && strings.HasSuffix(p, w.to) {
			return p[:len(p)-len(w.to)] + w.from + rest, true
		}
	}
	return k, false
}

// IsOriginalKey reports whether a label/annotation/finalizer key uses an original prefix.
func (r *Rules) IsOriginalKey(k string) bool {
	_, ok := r.ix().renameKeyPlain(k)
	return ok
}

// RenameKey renames a label, annotation or finalizer key (component -> cluster).
func (r *Rules) RenameKey(k string) (string, bool) {
	ix := r.ix()
	if len(k) == 0 {
		return k, false
	}
	if n, base := r.splitPreserved(k); n > 0 {
		if _, ok := ix.renameKeyPlain(base); ok {
			return k[len(r.PreservedPrefix):], true
		}
		return k, false
	}
	return ix.renameKeyPlain(k)
}

// RestoreKey restores a label, annotation or finalizer key (cluster -> component).
func (r *Rules) RestoreKey(k string) (string, bool) {
	ix := r.ix()
	if len(k) == 0 {
		return k, false
	}
	n, base := r.splitPreserved(k)
	if n == 0 {
		if v, ok := ix.restoreKeyPlain(k); ok {
			return v, true
		}
	}
	if _, ok := ix.renameKeyPlain(base); ok {
		return r.PreservedPrefix + k, true
	}
	return k, false
}

// HasValueRules reports whether label values of the original key k are renamed.
func (r *Rules) HasValueRules(k string) bool { return r.ix().valueKeys[k] }

// RenameLabelValue renames the value v of the label whose original key is k.
func (r *Rules) RenameLabelValue(k, v string) (string, bool) {
	ix := r.ix()
	if !ix.valueKeys[k] {
		return v, false
	}
	if n, base := r.splitPreserved(v); n > 0 {
		if _, ok := ix.values[[2]string{k, base}]; ok {
			return v[len(r.PreservedPrefix):], true
		}
		return v, false
	}
	if to, ok := ix.values[[2]string{k, v}]; ok {
		return to, true
	}
	return v, false
}

// RestoreLabelValue restores the value v of the label whose original key is k.
func (r *Rules) RestoreLabelValue(k, v string) (string, bool) {
	ix := r.ix()
	if !ix.valueKeys[k] {
		return v, false
	}
	if from, ok := ix.valuesBack[[2]string{k, v}]; ok {
		return from, true
	}
	_, base := r.splitPreserved(v)
	if _, ok := ix.values[[2]string{k, base}]; ok {
		return r.PreservedPrefix + v, true
	}
	return v, false
}

// RenameWebhookPath renames a webhook service path.
func (r *Rules) RenameWebhookPath(p string) (string, bool) {
	v, ok := r.ix().webhook[p]
	if !ok {
		return p, false
	}
	return v, true
}

// RestoreWebhookPath restores a webhook service path.
func (r *Rules) RestoreWebhookPath(p string) (string, bool) {
	v, ok := r.ix().webhookBack[p]
	if !ok {
		return p, false
	}
	return v, true
}
