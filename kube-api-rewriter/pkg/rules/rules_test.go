package rules

import (
	"strings"
	"testing"
)

func TestDefault(t *testing.T) {
	r := Default()
	if got := len(r.Kinds()); got != 17 {
		t.Errorf("kinds: %d", got)
	}
	kr := r.LookupKind(Rename, "instancetype.kubevirt.io", "VirtualMachineClusterPreference")
	if kr == nil || kr.Original.Scope != "Cluster" || kr.Renamed.Categories[0] != "intvirt" || kr.Renamed.ShortNames[0] != "intvirtvmcp" {
		t.Errorf("lookup: %+v", kr)
	}
	if back := r.LookupKind(Restore, "instancetype.internal.virtualization.deckhouse.io", "InternalVirtualizationVirtualMachineClusterPreference"); back != kr {
		t.Errorf("lookup of the renamed kind: %+v, want %+v", back, kr)
	}
	if res := r.LookupResource(Restore, "instancetype.internal.virtualization.deckhouse.io", "internalvirtualizationvirtualmachineclusterpreference"); res != kr {
		t.Errorf("lookup of the renamed singular: %+v", res)
	}
	if kr.From(Rename) != &kr.Original || kr.To(Rename) != &kr.Renamed || kr.From(Restore) != &kr.Renamed || kr.To(Restore) != &kr.Original {
		t.Error("From/To do not pick the view of the direction")
	}
}

// A mapping case: in is mapped by d to want (ok=false when want == in).
type mapCase struct {
	name    string
	d       Direction
	in      string
	want    string
	changed bool
}

func checkMap(t *testing.T, what string, cases []mapCase, f func(Direction, string) (string, bool)) {
	t.Helper()
	for _, c := range cases {
		if got, ok := f(c.d, c.in); got != c.want || ok != c.changed {
			t.Errorf("%s %s(%s, %q) = %q, %v; want %q, %v", c.name, what, c.d, c.in, got, ok, c.want, c.changed)
		}
	}
}

// both returns the cases that the pair (component, cluster) stands for: renaming the
// component's name gives the cluster's, restoring the cluster's gives the component's.
func both(name, component, cluster string) []mapCase {
	ch := component != cluster
	return []mapCase{{name, Rename, component, cluster, ch}, {name, Restore, cluster, component, ch}}
}

func pairs(ps ...[3]string) []mapCase {
	var cs []mapCase
	for _, p := range ps {
		cs = append(cs, both(p[0], p[1], p[2])...)
	}
	return cs
}

func TestGroup(t *testing.T) {
	cases := pairs(
		[3]string{"main", "kubevirt.io", "internal.virtualization.deckhouse.io"},
		[3]string{"suffix", "clone.kubevirt.io", "clone.internal.virtualization.deckhouse.io"},
		[3]string{"suffix", "snapshot.kubevirt.io", "snapshot.internal.virtualization.deckhouse.io"},
		[3]string{"preserved", "preserved-original-kubevirt.io", "kubevirt.io"},
		[3]string{"preserved twice", "preserved-original-preserved-original-kubevirt.io", "preserved-original-kubevirt.io"},
		[3]string{"core", "", ""},
		[3]string{"native", "apps", "apps"},
	)
	for _, g := range []string{"subresources.kubevirt.io", "cdi.kubevirt.io", "virtualization.deckhouse.io", "preserved-original-apps"} {
		cases = append(cases, mapCase{"unlisted", Rename, g, g, false}, mapCase{"unlisted", Restore, g, g, false})
	}
	checkMap(t, "Group", cases, Default().Group)
}

func TestKindResourceShortName(t *testing.T) {
	r := Default()
	const g, ig = "kubevirt.io", "internal.virtualization.deckhouse.io"
	in := func(group string, f func(Direction, string, string) (string, bool)) func(Direction, string) (string, bool) {
		return func(d Direction, s string) (string, bool) {
			if d == Restore && group == g {
				return f(d, ig, s)
			}
			return f(d, group, s)
		}
	}
	checkMap(t, "Kind", pairs(
		[3]string{"kind", "VirtualMachine", "InternalVirtualizationVirtualMachine"},
		[3]string{"list kind", "VirtualMachineList", "InternalVirtualizationVirtualMachineList"},
		[3]string{"other kind", "VirtualMachineInstance", "InternalVirtualizationVirtualMachineInstance"},
		[3]string{"unknown", "Pod", "Pod"},
	), in(g, r.Kind))
	checkMap(t, "Kind", []mapCase{
		{"friendly group", Rename, "VirtualMachine", "VirtualMachine", false},
		{"friendly group", Restore, "VirtualMachine", "VirtualMachine", false},
	}, in("virtualization.deckhouse.io", r.Kind))
	checkMap(t, "Resource", pairs(
		[3]string{"plural", "virtualmachines", "internalvirtualizationvirtualmachines"},
		[3]string{"singular", "virtualmachine", "internalvirtualizationvirtualmachine"},
		[3]string{"subresource", "virtualmachines/status", "internalvirtualizationvirtualmachines/status"},
		[3]string{"unknown", "pods", "pods"},
	), in(g, r.Resource))
	checkMap(t, "ShortName", pairs(
		[3]string{"short", "vmi", "intvirtvmi"},
		[3]string{"unknown", "po", "po"},
	), in(g, r.ShortName))
}

func TestKeys(t *testing.T) {
	const ik = "kubevirt.internal.virtualization.deckhouse.io"
	checkMap(t, "Key", pairs(
		[3]string{"exact", "kubevirt.io", ik},
		[3]string{"exact", "kubevirt.io/created-by", ik + "/created-by"},
		[3]string{"wildcard", "vm.kubevirt.io/name", "vm." + ik + "/name"},
		[3]string{"vmi prefix", "vmi.kubevirt.io/id", "vmi." + ik + "/id"},
		[3]string{"preserved vmi prefix", "preserved-original-vmi.kubevirt.io/id", "vmi.kubevirt.io/id"},
		[3]string{"wildcard", "operator.kubevirt.io/x", "operator." + ik + "/x"},
		[3]string{"wildcard", "prometheus.kubevirt.io", "prometheus." + ik},
		[3]string{"longer wildcard", "cpu-model.node.kubevirt.io/Haswell", "cpu-model.node.virtualization.deckhouse.io/Haswell"},
		[3]string{"preserved", "preserved-original-kubevirt.io/foo", "kubevirt.io/foo"},
		[3]string{"preserved twice", "preserved-original-preserved-original-kubevirt.io", "preserved-original-kubevirt.io"},
		[3]string{"preserved wildcard", "preserved-original-cpu.node.kubevirt.io/x", "cpu.node.kubevirt.io/x"},
		[3]string{"plain", "app", "app"},
		[3]string{"unlisted", "cdi.kubevirt.io/x", "cdi.kubevirt.io/x"},
		[3]string{"lookalike", "kubevirt.io.example.com/x", "kubevirt.io.example.com/x"},
		[3]string{"preserved plain", "preserved-original-app", "preserved-original-app"},
		[3]string{"preserved renamed", "preserved-original-" + ik, "preserved-original-" + ik},
		[3]string{"preserved renamed wildcard", "preserved-original-x.node.virtualization.deckhouse.io", "preserved-original-x.node.virtualization.deckhouse.io"},
		[3]string{"empty", "", ""},
	), Default().Key)
}

func TestLabelValues(t *testing.T) {
	r := Default()
	checkMap(t, "LabelValue", pairs(
		[3]string{"rule", "virt-operator", "virt-operator-internal-virtualization"},
		[3]string{"preserved", "preserved-original-virt-operator", "virt-operator"},
		[3]string{"other", "x", "x"},
		[3]string{"preserved other", "preserved-original-x", "preserved-original-x"},
	), func(d Direction, v string) (string, bool) { return r.LabelValue(d, "app.kubernetes.io/managed-by", v) })
	checkMap(t, "LabelValue", []mapCase{
		{"key without rules", Rename, "virt-operator", "virt-operator", false},
		{"key without rules", Restore, "virt-operator-internal-virtualization", "virt-operator-internal-virtualization", false},
	}, func(d Direction, v string) (string, bool) { return r.LabelValue(d, "app", v) })
}

func TestWebhookPath(t *testing.T) {
	r, err := Load([]byte(`renamed: {kindPrefix: P, resourcePrefix: p}
preservedPrefix: keep-
groups: [{name: a.io, renamed: b.io, kinds: [{kind: K, plural: ks, singular: k}]}]
webhookPaths: [{from: /validate-a, to: /validate-b}]
`))
	if err != nil {
		t.Fatal(err)
	}
	checkMap(t, "WebhookPath", pairs(
		[3]string{"rule", "/validate-a", "/validate-b"},
		[3]string{"other", "/mutate", "/mutate"},
	), r.WebhookPath)
}

func TestValidation(t *testing.T) {
	base := func(groups string) string {
		return `renamed: {kindPrefix: P, resourcePrefix: p, shortNamePrefix: s, categories: [c]}
preservedPrefix: keep-
groupSuffix: {from: a.io, to: b.io}
groups:
` + groups
	}
	for _, c := range []struct{ name, doc, want string }{
		{"ok", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n"), ""},
		{"duplicate kind", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}, {kind: K, plural: ks2, singular: k2}]\n"), "duplicate kind"},
		{"empty kind", base("- name: a.io\n  kinds: [{kind: '', plural: ks, singular: k}]\n"), "kinds[0].kind: must not be empty"},
		{"empty plural", base("- name: a.io\n  kinds: [{kind: K, singular: k}]\n"), "plural: must not be empty"},
		{"duplicate group", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n- name: a.io\n  kinds: [{kind: L, plural: ls, singular: l}]\n"), "duplicate group"},
		{"renamed collides", base("- name: x.a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n- name: y.a.io\n  renamed: x.b.io\n  kinds: [{kind: L, plural: ls, singular: l}]\n"), "collides"},
		{"no rename", base("- name: c.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n"), "renamed: not set"},
		{"prefix without target", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "metadataPrefixes: [{from: a.io}]\n", "from and to must not be empty"},
		{"prefix not reversible", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "metadataPrefixes: [{from: a.io, to: b.io}, {from: b.io, to: c.io}]\n", "not be reversible"},
		{"wildcard mismatch", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "metadataPrefixes: [{from: '*.a.io', to: b.io}]\n", "both or neither"},
		{"category all", strings.Replace(base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n"), "[c]", "[all]", 1), "renamed.categories[0]"},
		{"unknown field", base("- name: a.io\n  kindz: []\n"), "unknown field"},
		{"value collides", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "labelValues: [{key: k, from: a, to: b}, {key: k, from: c, to: b}]\n", "collides"},
		{"passthrough renamed group", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "passthroughGroups: [a.io]\n", "passthroughGroups[0]: \"a.io\" is a renamed group"},
		{"passthrough cluster group", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "passthroughGroups: [x.io, b.io]\n", "passthroughGroups[1]: \"b.io\" is the renamed name"},
		{"passthrough core group", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "passthroughGroups: ['']\n", "passthroughGroups[0]: must not be empty"},
		{"passthrough duplicate", base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n") + "passthroughGroups: [x.io, x.io]\n", "duplicate group"},
		{"no preserved prefix", strings.Replace(base("- name: a.io\n  kinds: [{kind: K, plural: ks, singular: k}]\n"), "preservedPrefix: keep-", "", 1), "preservedPrefix: must not be empty"},
	} {
		_, err := Load([]byte(c.doc))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

func TestDefaultYAMLReloads(t *testing.T) {
	if _, err := Load(DefaultYAML()); err != nil {
		t.Fatal(err)
	}
}
