// Package rules holds the rename rules of kube-api-rewriter as data.
//
// The rules say which API groups, kinds, resources, short names and categories
// the component ("original" view, e.g. kubevirt.io) uses and what they are called
// in the cluster ("renamed" view, e.g. internal.virtualization.deckhouse.io), and
// how label, annotation and finalizer keys and some label values are renamed.
// The code knows no KubeVirt names: everything comes from a YAML document, see
// Load and Default.
//
// Vocabulary used by every function in this module:
//
//   - Rename: original (component) view -> renamed (cluster) view. Used on requests.
//   - Restore: renamed (cluster) view -> original (component) view. Used on responses.
//
// # Preserving original names found in the cluster
//
// The cluster may already hold original names, for example a stock KubeVirt put
// the label "kubevirt.io/foo" on a pod. Restoring such a key must not make it
// collide with the restored form of "kubevirt.internal.virtualization.deckhouse.io/foo".
// Restore therefore prefixes every original name (label/annotation/finalizer key,
// value of a value rule, API group) found in the cluster with PreservedPrefix, and
// Rename strips exactly one PreservedPrefix again:
//
//	cluster                                      component
//	kubevirt.internal.virtualization.deckhouse.io/foo  <->  kubevirt.io/foo
//	kubevirt.io/foo                               <->  preserved-original-kubevirt.io/foo
//	preserved-original-kubevirt.io/foo            <->  preserved-original-preserved-original-kubevirt.io/foo
//
// Restore is injective, so Rename(Restore(y)) == y for every cluster name y, and
// Restore(Rename(x)) == x for every component name x that does not itself use a
// renamed name (a component never does).
package rules

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Rules is the YAML/JSON schema of a rule file. After Load it also carries the
// lookup indexes; a loaded *Rules is read-only and safe for concurrent use.
type Rules struct {
	// Renamed says how the names of every listed kind are derived in the cluster.
	Renamed RenamedNames `json:"renamed"`
	// PreservedPrefix is put in front of original names found in the cluster when
	// restoring them (see the package doc). Required, e.g. "preserved-original-".
	PreservedPrefix string `json:"preservedPrefix"`
	// GroupSuffix computes Group.Renamed when a group does not set it: a group
	// equal to From becomes To, a group "X.<From>" becomes "X.<To>".
	GroupSuffix *SuffixRule `json:"groupSuffix,omitempty"`
	// Groups lists every renamed API group. Groups not listed (for example
	// subresources.kubevirt.io) are never touched.
	Groups []Group `json:"groups"`
	// MetadataPrefixes rename the prefix of label, annotation and finalizer keys.
	MetadataPrefixes []PrefixRule `json:"metadataPrefixes,omitempty"`
	// LabelValues rename single label values of a given (original) key.
	LabelValues []LabelValueRule `json:"labelValues,omitempty"`
	// WebhookPaths rename URL paths of webhook services (clientConfig.service.path).
	WebhookPaths []PathRule `json:"webhookPaths,omitempty"`
	// PassthroughGroups are API groups whose objects are never touched, metadata included, in
	// either direction: requests to them pass through as they are, and objects of them inside
	// other documents are copied verbatim. The module's own friendly API belongs here, so that a
	// user's "kubevirt.io/foo" label on a friendly VirtualMachine reads back as the user wrote it.
	PassthroughGroups []string `json:"passthroughGroups,omitempty"`

	idx *index
}

// RenamedNames derives the cluster names of every kind.
type RenamedNames struct {
	// KindPrefix is prepended to Kind and ListKind: VirtualMachine -> InternalVirtualizationVirtualMachine.
	KindPrefix string `json:"kindPrefix"`
	// ResourcePrefix is prepended to plural and singular resource names.
	ResourcePrefix string `json:"resourcePrefix"`
	// ShortNamePrefix is prepended to every short name: vm -> intvirtvm.
	ShortNamePrefix string `json:"shortNamePrefix"`
	// Categories replace the categories of every renamed kind (never "all").
	Categories []string `json:"categories,omitempty"`
}

// SuffixRule renames a DNS suffix.
type SuffixRule struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Group is one original API group and its kinds.
type Group struct {
	// Name is the original group, e.g. "kubevirt.io".
	Name string `json:"name"`
	// Renamed is the group in the cluster; computed from GroupSuffix when empty.
	Renamed string `json:"renamed,omitempty"`
	// Hide the original group from the component (discovery, CRDs). Default true.
	Hide *bool `json:"hide,omitempty"`
	// Kinds of the group.
	Kinds []Kind `json:"kinds"`
}

// Kind is one original kind with its resource names.
type Kind struct {
	Kind string `json:"kind"`
	// ListKind defaults to Kind+"List".
	ListKind   string   `json:"listKind,omitempty"`
	Plural     string   `json:"plural"`
	Singular   string   `json:"singular"`
	ShortNames []string `json:"shortNames,omitempty"`
	Categories []string `json:"categories,omitempty"`
	// Scope is "Namespaced" (default) or "Cluster". Informational, for CRD tooling.
	Scope string `json:"scope,omitempty"`
}

// PrefixRule renames the prefix of a metadata key. A key matches From when the
// key equals From or starts with From+"/". A From of the form "*.suffix" matches
// any prefix that ends with ".suffix"; To must then also be "*.suffix2" and the
// part matched by "*" is kept.
type PrefixRule struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// LabelValueRule renames one value of the label Key (Key in the original view).
type LabelValueRule struct {
	Key  string `json:"key"`
	From string `json:"from"`
	To   string `json:"to"`
}

// PathRule renames one webhook URL path.
type PathRule struct {
	From string `json:"from"`
	To   string `json:"to"`
}

//go:embed kubevirt-v1.6.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded KubeVirt v1.6 rule file.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

var defaultRules *Rules

// Default returns the embedded KubeVirt v1.6 rules. It panics only if the
// embedded file is invalid, which the tests rule out.
func Default() *Rules {
	if defaultRules == nil {
		r, err := Load(defaultYAML)
		if err != nil {
			panic("rules: embedded default rules are invalid: " + err.Error())
		}
		defaultRules = r
	}
	return defaultRules
}

func init() { Default() }

// Load parses a YAML (or JSON) rule document strictly (unknown fields are
// errors), validates it and builds the lookup indexes.
func Load(data []byte) (*Rules, error) {
	var r Rules
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return nil, fmt.Errorf("rules: parse: %w", err)
	}
	if err := r.build(); err != nil {
		return nil, err
	}
	return &r, nil
}

// ValidationError lists every problem found in a rule document.
type ValidationError struct{ Problems []string }

var _ error = (*ValidationError)(nil)

func (e *ValidationError) Error() string {
	return "rules: invalid: " + strings.Join(e.Problems, "; ")
}

// Names are the names of one kind in one view.
type Names struct {
	Group      string
	Kind       string
	ListKind   string
	Plural     string
	Singular   string
	ShortNames []string
	Categories []string
	Scope      string
}

// KindRule pairs the original and the renamed names of one kind.
type KindRule struct {
	Original Names
	Renamed  Names
}

// groupIdx holds the lookups of one group in one direction, by the names of the view the
// direction reads.
type groupIdx struct {
	to        string             // the group's name in the other view
	hide      bool               // the original group is hidden from the component
	kinds     map[string]kindRef // kind or list kind -> rule
	resources map[string]resRef  // plural or singular resource -> rule
	short     map[string]string  // short name -> short name
}

type kindRef struct {
	rule *KindRule
	to   string // the kind (or list kind) in the other view
}

type resRef struct {
	rule *KindRule
	to   string // the resource in the other view
}

type prefixIdx struct {
	from, to string // without "*" for wildcards: ".node.kubevirt.io"
	wildcard bool
}

// dirIndex holds the lookups of one direction, by the names of the view the direction reads.
type dirIndex struct {
	groups    map[string]*groupIdx
	exactKeys map[string]string    // metadata key prefix -> prefix
	wildKeys  []prefixIdx          // from is read, to written; longest from first
	values    map[[2]string]string // (original key, value) -> value
	webhook   map[string]string
}

type index struct {
	dir         [2]dirIndex // by Direction
	kinds       []*KindRule
	valueKeys   map[string]bool
	origGroups  []string
	renamedList []string
	passthrough map[string]bool
}

func newDirIndex() dirIndex {
	return dirIndex{
		groups:    map[string]*groupIdx{},
		exactKeys: map[string]string{},
		values:    map[[2]string]string{},
		webhook:   map[string]string{},
	}
}

func newGroupIdx(to string, hide bool) *groupIdx {
	return &groupIdx{to: to, hide: hide, kinds: map[string]kindRef{},
		resources: map[string]resRef{}, short: map[string]string{}}
}

func (r *Rules) build() error {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	ix := &index{dir: [2]dirIndex{newDirIndex(), newDirIndex()}, valueKeys: map[string]bool{}, passthrough: map[string]bool{}}
	// fwd reads original names, back renamed ones.
	fwd, back := &ix.dir[Rename], &ix.dir[Restore]
	rn := r.Renamed
	if rn.KindPrefix == "" {
		bad("renamed.kindPrefix: must not be empty")
	}
	if rn.ResourcePrefix == "" {
		bad("renamed.resourcePrefix: must not be empty")
	} else if strings.ToLower(rn.ResourcePrefix) != rn.ResourcePrefix {
		bad("renamed.resourcePrefix: %q must be lower case", rn.ResourcePrefix)
	}
	for i, c := range rn.Categories {
		if c == "" || c == "all" {
			bad("renamed.categories[%d]: %q is not allowed (renamed kinds are never in \"all\")", i, c)
		}
	}
	if r.PreservedPrefix == "" {
		bad("preservedPrefix: must not be empty")
	} else if strings.ContainsAny(r.PreservedPrefix, "/\"") {
		bad("preservedPrefix: %q must not contain '/' or '\"'", r.PreservedPrefix)
	}
	if s := r.GroupSuffix; s != nil && (s.From == "" || s.To == "" || s.From == s.To) {
		bad("groupSuffix: from and to must be set and differ (from=%q to=%q)", s.From, s.To)
	}
	if len(r.Groups) == 0 {
		bad("groups: at least one group is required")
	}
	for gi := range r.Groups {
		g := &r.Groups[gi]
		f := fmt.Sprintf("groups[%d]", gi)
		if g.Name == "" {
			bad("%s.name: must not be empty", f)
			continue
		}
		f = fmt.Sprintf("groups[%d](%s)", gi, g.Name)
		ren := g.Renamed
		if ren == "" && r.GroupSuffix != nil {
			if g.Name == r.GroupSuffix.From {
				ren = r.GroupSuffix.To
			} else if strings.HasSuffix(g.Name, "."+r.GroupSuffix.From) {
				ren = strings.TrimSuffix(g.Name, r.GroupSuffix.From) + r.GroupSuffix.To
			}
		}
		if ren == "" {
			bad("%s.renamed: not set and groupSuffix does not apply", f)
			continue
		}
		if ren == g.Name {
			bad("%s.renamed: %q equals the original name", f, ren)
		}
		if _, dup := fwd.groups[g.Name]; dup {
			bad("%s.name: duplicate group %q", f, g.Name)
			continue
		}
		if _, dup := back.groups[ren]; dup {
			bad("%s.renamed: %q collides with the renamed name of another group", f, ren)
			continue
		}
		hide := g.Hide == nil || *g.Hide
		gx, gb := newGroupIdx(ren, hide), newGroupIdx(g.Name, hide)
		fwd.groups[g.Name] = gx
		back.groups[ren] = gb
		ix.origGroups = append(ix.origGroups, g.Name)
		ix.renamedList = append(ix.renamedList, ren)
		if len(g.Kinds) == 0 {
			bad("%s.kinds: at least one kind is required", f)
		}
		for ki := range g.Kinds {
			k := g.Kinds[ki]
			kf := fmt.Sprintf("%s.kinds[%d]", f, ki)
			if k.Kind == "" {
				bad("%s.kind: must not be empty", kf)
				continue
			}
			kf = fmt.Sprintf("%s.kinds[%d](%s)", f, ki, k.Kind)
			if k.Plural == "" {
				bad("%s.plural: must not be empty", kf)
			}
			if k.Singular == "" {
				bad("%s.singular: must not be empty", kf)
			}
			if k.ListKind == "" {
				k.ListKind = k.Kind + "List"
			}
			switch k.Scope {
			case "":
				k.Scope = "Namespaced"
			case "Namespaced", "Cluster":
			default:
				bad("%s.scope: %q must be Namespaced or Cluster", kf, k.Scope)
			}
			if k.Plural != strings.ToLower(k.Plural) || k.Singular != strings.ToLower(k.Singular) {
				bad("%s: plural and singular must be lower case", kf)
			}
			kr := &KindRule{
				Original: Names{Group: g.Name, Kind: k.Kind, ListKind: k.ListKind, Plural: k.Plural,
					Singular: k.Singular, ShortNames: k.ShortNames, Categories: k.Categories, Scope: k.Scope},
				Renamed: Names{Group: ren, Kind: rn.KindPrefix + k.Kind, ListKind: rn.KindPrefix + k.ListKind,
					Plural: rn.ResourcePrefix + k.Plural, Singular: rn.ResourcePrefix + k.Singular,
					Categories: append([]string(nil), rn.Categories...), Scope: k.Scope},
			}
			for _, s := range k.ShortNames {
				kr.Renamed.ShortNames = append(kr.Renamed.ShortNames, rn.ShortNamePrefix+s)
			}
			if len(k.ShortNames) > 0 && rn.ShortNamePrefix == "" {
				bad("renamed.shortNamePrefix: must not be empty when kinds have short names (%s)", kf)
			}
			for _, n := range []struct{ name, v, to string }{
				{"kind", k.Kind, kr.Renamed.Kind}, {"listKind", k.ListKind, kr.Renamed.ListKind},
			} {
				if _, dup := gx.kinds[n.v]; dup {
					bad("%s.%s: duplicate kind %q in group %s", kf, n.name, n.v, g.Name)
					continue
				}
				gx.kinds[n.v] = kindRef{kr, n.to}
			}
			gb.kinds[kr.Renamed.Kind] = kindRef{kr, k.Kind}
			gb.kinds[kr.Renamed.ListKind] = kindRef{kr, k.ListKind}
			for _, n := range []string{k.Plural, k.Singular} {
				if n == "" {
					continue
				}
				if old, dup := gx.resources[n]; dup && !(old.rule == kr && k.Plural == k.Singular) {
					bad("%s: duplicate resource name %q in group %s", kf, n, g.Name)
					continue
				}
				gx.resources[n] = resRef{kr, rn.ResourcePrefix + n}
				gb.resources[rn.ResourcePrefix+n] = resRef{kr, n}
			}
			for si, s := range k.ShortNames {
				if s == "" {
					bad("%s.shortNames[%d]: must not be empty", kf, si)
					continue
				}
				if _, dup := gx.short[s]; dup {
					bad("%s.shortNames[%d]: duplicate short name %q in group %s", kf, si, s, g.Name)
					continue
				}
				gx.short[s] = rn.ShortNamePrefix + s
				gb.short[rn.ShortNamePrefix+s] = s
			}
			ix.kinds = append(ix.kinds, kr)
		}
	}
	for gi, g := range r.Groups {
		if gb, ok := back.groups[g.Name]; ok {
			bad("groups[%d](%s): the original group is also the renamed name of %s", gi, g.Name, gb.to)
		}
	}

	// Metadata key prefixes.
	var all []prefixIdx
	for i, pr := range r.MetadataPrefixes {
		f := fmt.Sprintf("metadataPrefixes[%d]", i)
		if pr.From == "" || pr.To == "" {
			bad("%s: from and to must not be empty (from=%q to=%q)", f, pr.From, pr.To)
			continue
		}
		if strings.Contains(pr.From+pr.To, "/") {
			bad("%s: from and to are key prefixes and must not contain '/'", f)
			continue
		}
		wf, wt := strings.HasPrefix(pr.From, "*."), strings.HasPrefix(pr.To, "*.")
		if wf != wt {
			bad("%s: from %q and to %q must both or neither start with \"*.\"", f, pr.From, pr.To)
			continue
		}
		if strings.Contains(strings.TrimPrefix(pr.From, "*"), "*") || strings.Contains(strings.TrimPrefix(pr.To, "*"), "*") {
			bad("%s: '*' is only allowed as the first label", f)
			continue
		}
		if pr.From == pr.To {
			bad("%s: from and to are equal (%q)", f, pr.From)
			continue
		}
		x := prefixIdx{from: strings.TrimPrefix(pr.From, "*"), to: strings.TrimPrefix(pr.To, "*"), wildcard: wf}
		for j, o := range all {
			if x.from == o.from && x.wildcard == o.wildcard {
				bad("%s.from: duplicate prefix %q (also metadataPrefixes[%d])", f, pr.From, j)
			}
			if x.to == o.to && x.wildcard == o.wildcard {
				bad("%s.to: %q collides with metadataPrefixes[%d].to", f, pr.To, j)
			}
		}
		all = append(all, x)
		if wf {
			fwd.wildKeys = append(fwd.wildKeys, x)
			back.wildKeys = append(back.wildKeys, prefixIdx{from: x.to, to: x.from, wildcard: true})
		} else {
			fwd.exactKeys[x.from] = x.to
			back.exactKeys[x.to] = x.from
		}
	}
	// An original prefix must never look like a renamed one and vice versa,
	// otherwise renaming is not reversible.
	for i, a := range all {
		for j, b := range all {
			if patternsOverlap(a.from, a.wildcard, b.to, b.wildcard) {
				bad("metadataPrefixes[%d].from overlaps metadataPrefixes[%d].to: renaming would not be reversible", i, j)
			}
		}
		if hasPrefixPattern(r.PreservedPrefix, a) {
			bad("preservedPrefix: %q overlaps metadataPrefixes[%d]", r.PreservedPrefix, i)
		}
	}
	for d := range ix.dir {
		w := ix.dir[d].wildKeys
		sort.SliceStable(w, func(i, j int) bool { return len(w[i].from) > len(w[j].from) })
	}

	for i, v := range r.LabelValues {
		f := fmt.Sprintf("labelValues[%d]", i)
		if v.Key == "" || v.From == "" || v.To == "" {
			bad("%s: key, from and to must not be empty", f)
			continue
		}
		if v.From == v.To {
			bad("%s: from and to are equal (%q)", f, v.From)
			continue
		}
		if strings.HasPrefix(v.From, r.PreservedPrefix) || strings.HasPrefix(v.To, r.PreservedPrefix) {
			bad("%s: values must not start with preservedPrefix", f)
		}
		if _, dup := fwd.values[[2]string{v.Key, v.From}]; dup {
			bad("%s: duplicate rule for %s=%s", f, v.Key, v.From)
			continue
		}
		if _, dup := back.values[[2]string{v.Key, v.To}]; dup {
			bad("%s.to: %s=%s collides with another rule", f, v.Key, v.To)
			continue
		}
		if _, dup := fwd.values[[2]string{v.Key, v.To}]; dup {
			bad("%s.to: %s=%s is also an original value", f, v.Key, v.To)
		}
		if _, dup := back.values[[2]string{v.Key, v.From}]; dup {
			bad("%s.from: %s=%s is also a renamed value", f, v.Key, v.From)
		}
		fwd.values[[2]string{v.Key, v.From}] = v.To
		back.values[[2]string{v.Key, v.To}] = v.From
		ix.valueKeys[v.Key] = true
	}
	for i, w := range r.WebhookPaths {
		f := fmt.Sprintf("webhookPaths[%d]", i)
		if !strings.HasPrefix(w.From, "/") || !strings.HasPrefix(w.To, "/") || w.From == w.To {
			bad("%s: from and to must be different absolute paths (from=%q to=%q)", f, w.From, w.To)
			continue
		}
		if _, dup := fwd.webhook[w.From]; dup {
			bad("%s.from: duplicate path %q", f, w.From)
			continue
		}
		if _, dup := back.webhook[w.To]; dup {
			bad("%s.to: duplicate path %q", f, w.To)
			continue
		}
		fwd.webhook[w.From] = w.To
		back.webhook[w.To] = w.From
	}
	for i, g := range r.PassthroughGroups {
		f := fmt.Sprintf("passthroughGroups[%d]", i)
		switch _, orig := fwd.groups[g]; {
		case g == "":
			bad("%s: must not be empty (the core group always carries renamed names)", f)
		case orig:
			bad("%s: %q is a renamed group", f, g)
		case back.groups[g] != nil:
			bad("%s: %q is the renamed name of a group", f, g)
		case ix.passthrough[g]:
			bad("%s: duplicate group %q", f, g)
		}
		ix.passthrough[g] = true
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	r.idx = ix
	return nil
}

func patternsOverlap(a string, aw bool, b string, bw bool) bool {
	switch {
	case !aw && !bw:
		return a == b
	case aw && bw:
		return strings.HasSuffix(a, b) || strings.HasSuffix(b, a)
	case aw:
		return strings.HasSuffix(b, a) && len(b) > len(a)
	default:
		return strings.HasSuffix(a, b) && len(a) > len(b)
	}
}

func hasPrefixPattern(pp string, x prefixIdx) bool {
	return !x.wildcard && (strings.HasPrefix(x.from, pp) || strings.HasPrefix(x.to, pp))
}

var errNotLoaded = errors.New("rules: not loaded, use Load or Default")

func (r *Rules) ix() *index {
	if r == nil || r.idx == nil {
		panic(errNotLoaded)
	}
	return r.idx
}
