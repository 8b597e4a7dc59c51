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
	for _, c := range []struct{ in, want string }{
		{"kubevirt.io", "internal.virtualization.deckhouse.io"},
		{"clone.kubevirt.io", "clone.internal.virtualization.deckhouse.io"},
		{"snapshot.kubevirt.io", "snapshot.internal.virtualization.deckhouse.io"},
		{"preserved-original-kubevirt.io", "kubevirt.io"},
	} {
		if g, ok := r.RenameGroup(c.in); !ok || g != c.want {
			t.Errorf("RenameGroup(%s) = %s", c.in, g)
		}
		if g, ok := r.RestoreGroup(c.want); !ok || g != c.in {
			t.Errorf("RestoreGroup(%s) = %s", c.want, g)
		}
	}
	for _, g := range []string{"subresources.kubevirt.io", "cdi.kubevirt.io", "virtualization.deckhouse.io", ""} {
		if _, ok := r.RenameGroup(g); ok {
			t.Errorf("%s renamed", g)
		}
	}
	if k, ok := r.RenameKind("kubevirt.io", "VirtualMachine"); !ok || k != "InternalVirtualizationVirtualMachine" {
		t.Errorf("kind %s", k)
	}
	if k, ok := r.RenameKind("kubevirt.io", "VirtualMachineList"); !ok || k != "InternalVirtualizationVirtualMachineList" {
		t.Errorf("list kind %s", k)
	}
	if _, ok := r.RenameKind("virtualization.deckhouse.io", "VirtualMachine"); ok {
		t.Error("friendly VirtualMachine renamed")
	}
	if k, ok := r.RestoreKind("internal.virtualization.deckhouse.io", "InternalVirtualizationVirtualMachineInstance"); !ok || k != "VirtualMachineInstance" {
		t.Errorf("restore kind %s", k)
	}
	if v, ok := r.RenameResource("kubevirt.io", "virtualmachines/status"); !ok || v != "internalvirtualizationvirtualmachines/status" {
		t.Errorf("resource %s", v)
	}
	if v, ok := r.RenameShortName("kubevirt.io", "vmi"); !ok || v != "intvirtvmi" {
		t.Errorf("short %s", v)
	}
	kr := r.LookupKind("instancetype.kubevirt.io", "VirtualMachineClusterPreference")
	if kr == nil || kr.Original.Scope != "Cluster" || kr.Renamed.Categories[0] != "intvirt" || kr.Renamed.ShortNames[0] != "intvirtvmcp" {
		t.Errorf("lookup: %+v", kr)
	}
}

func TestKeys(t *testing.T) {
	r := Default()
	const ik = "kubevirt.internal.virtualization.deckhouse.io"
	pairs := [][2]string{ // component, cluster
		{"kubevirt.io", ik},
		{"kubevirt.io/created-by", ik + "/created-by"},
		{"vm.kubevirt.io/name", "vm." + ik + "/name"},
		{"operator.kubevirt.io/x", "operator." + ik + "/x"},
		{"prometheus.kubevirt.io", "prometheus." + ik},
		{"cpu-model.node.kubevirt.io/Haswell", "cpu-model.node.virtualization.deckhouse.io/Haswell"},
		{"preserved-original-kubevirt.io/foo", "kubevirt.io/foo"},
		{"preserved-original-preserved-original-kubevirt.io", "preserved-original-kubevirt.io"},
		{"preserved-original-cpu.node.kubevirt.io/x", "cpu.node.kubevirt.io/x"},
		{"app", "app"},
		{"cdi.kubevirt.io/x", "cdi.kubevirt.io/x"},
		{"kubevirt.io.example.com/x", "kubevirt.io.example.com/x"},
		{"preserved-original-app", "preserved-original-app"},
		{"preserved-original-" + ik, "preserved-original-" + ik},
		{"preserved-original-x.node.virtualization.deckhouse.io", "preserved-original-x.node.virtualization.deckhouse.io"},
	}
	for _, p := range pairs {
		if got, _ := r.RenameKey(p[0]); got != p[1] {
			t.Errorf("RenameKey(%s) = %s, want %s", p[0], got, p[1])
		}
		if got, _ := r.RestoreKey(p[1]); got != p[0] {
			t.Errorf("RestoreKey(%s) = %s, want %s", p[1], got, p[0])
		}
	}
	key := "app.kubernetes.io/managed-by"
	for _, p := range [][2]string{{"virt-operator", "virt-operator-internal-virtualization"}, {"preserved-original-virt-operator", "virt-operator"}, {"x", "x"}} {
		if got, _ := r.RenameLabelValue(key, p[0]); got != p[1] {
			t.Errorf("RenameLabelValue(%s) = %s", p[0], got)
		}
		if got, _ := r.RestoreLabelValue(key, p[1]); got != p[0] {
			t.Errorf("RestoreLabelValue(%s) = %s", p[1], got)
		}
	}
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
