package rewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Keys of the component view: plain, original (renamed in the cluster) and
// preserved originals (original keys a stock KubeVirt left in the cluster).
var compKeys = []string{"app", "kubevirt.io", "kubevirt.io/created-by", "vm.kubevirt.io/name", "operator.kubevirt.io",
	"prometheus.kubevirt.io/x", "cpu-model.node.kubevirt.io/Haswell", "host-model-cpu.node.kubevirt.io/x",
	"preserved-original-kubevirt.io/x", "preserved-original-preserved-original-kubevirt.io", "preserved-original-app",
	"app.kubernetes.io/managed-by", "cdi.kubevirt.io/x", "subresources.kubevirt.io/y", "example.com/kubevirt.io"}

// Keys of the cluster view: anything at all.
var clusterKeys = append([]string{IK, IK + "/a", "vm." + IK + "/name", "x.node.virtualization.deckhouse.io/y",
	"preserved-original-" + IK + "/z", "preserved-original-x.node.virtualization.deckhouse.io"}, compKeys...)

var compValues = []string{"", "x", "virt-operator", "preserved-original-virt-operator", "virt-launcher"}
var clusterValues = append([]string{"virt-operator-internal-virtualization", "preserved-original-preserved-original-virt-operator"}, compValues...)

var compTypes = [][2]string{{"kubevirt.io/v1", "VirtualMachine"}, {"kubevirt.io/v1", "VirtualMachineInstance"}, {"v1", "Pod"},
	{"apps/v1", "Deployment"}, {"virtualization.deckhouse.io/v1alpha2", "VirtualMachine"}, {"snapshot.kubevirt.io/v1beta1", "VirtualMachineSnapshot"},
	{"preserved-original-kubevirt.io/v1", "VirtualMachine"}, {"cdi.kubevirt.io/v1beta1", "DataVolume"}, {"v1", "Service"}, {"policy/v1", "PodDisruptionBudget"},
	{"v1", "Event"}, {"rbac.authorization.k8s.io/v1", "ClusterRole"}}

var clusterTypes = append([][2]string{{IG + "/v1", "InternalVirtualizationVirtualMachine"}, {"kubevirt.io/v1", "VirtualMachine"},
	{"clone." + IG + "/v1beta1", "InternalVirtualizationVirtualMachineClone"}}, compTypes...)

type gen struct {
	r            *rand.Rand
	keys, values []string
	types        [][2]string
}

func (g *gen) pick(s []string) string { return s[g.r.IntN(len(s))] }

func (g *gen) labels() any {
	if g.r.IntN(8) == 0 {
		return nil
	}
	m := map[string]any{}
	for range g.r.IntN(6) {
		m[g.pick(g.keys)] = g.pick(g.values)
	}
	return m
}

func (g *gen) selector() map[string]any {
	return map[string]any{"matchLabels": g.labels(), "matchExpressions": []any{
		map[string]any{"key": g.pick(g.keys), "operator": "In", "values": []any{g.pick(g.values), g.pick(g.values)}},
	}}
}

func (g *gen) typ() [2]string { return g.types[g.r.IntN(len(g.types))] }

func (g *gen) object() map[string]any {
	t := g.typ()
	md := map[string]any{"name": fmt.Sprint("o", g.r.IntN(100)), "labels": g.labels(), "annotations": g.labels()}
	var fin []any
	for range g.r.IntN(3) {
		fin = append(fin, g.pick(g.keys))
	}
	md["finalizers"] = fin
	var owners []any
	for range g.r.IntN(3) {
		ot := g.typ()
		owners = append(owners, map[string]any{"apiVersion": ot[0], "kind": ot[1], "name": "n", "uid": "u"})
	}
	md["ownerReferences"] = owners
	md["managedFields"] = []any{map[string]any{"manager": "m", "apiVersion": g.typ()[0], "fieldsV1": map[string]any{"f:metadata": map[string]any{}}}}
	o := map[string]any{"metadata": md, "spec": map[string]any{"x": g.pick(g.keys), "nodeSelector": g.labels(), "selector": g.selector(),
		"template": map[string]any{"metadata": map[string]any{"labels": g.labels()}, "spec": map[string]any{"nodeSelector": g.labels()}}}}
	if g.r.IntN(4) > 0 {
		o["apiVersion"], o["kind"] = t[0], t[1]
	}
	switch t[1] {
	case "Event":
		ot := g.typ()
		o["involvedObject"] = map[string]any{"apiVersion": ot[0], "kind": ot[1]}
	case "ClusterRole":
		o["rules"] = []any{map[string]any{"apiGroups": []any{"kubevirt.io", "", "cdi.kubevirt.io"}, "resources": []any{"virtualmachines", "pods", "virtualmachines/status", "datavolumes"}}}
	}
	return o
}

func (g *gen) doc() []byte {
	var v any
	if g.r.IntN(3) == 0 {
		var items []any
		for range g.r.IntN(5) {
			items = append(items, g.object())
		}
		t := g.typ()
		v = map[string]any{"apiVersion": t[0], "kind": t[1] + "List", "metadata": map[string]any{}, "items": items}
	} else {
		v = g.object()
	}
	var b []byte
	if g.r.IntN(2) == 0 {
		b, _ = json.MarshalIndent(v, "", "  ")
	} else {
		b, _ = json.Marshal(v)
	}
	return b
}

func checkRoundTrip(t *testing.T, seed uint64) {
	comp := &gen{r: rand.New(rand.NewPCG(seed, 1)), keys: compKeys, values: compValues, types: compTypes}
	x := comp.doc()
	y, err := rw.Rename(x)
	if err != nil {
		t.Fatalf("seed %d: rename: %v\n%s", seed, err, x)
	}
	back, err := rw.Restore(y)
	if err != nil {
		t.Fatalf("seed %d: restore: %v", seed, err)
	}
	if !bytes.Equal(back, x) && !jsonEqual(t, back, x) {
		t.Fatalf("seed %d: restore(rename(x)) != x\n%s", seed, mustDiff(x, back))
	}
	clus := &gen{r: rand.New(rand.NewPCG(seed, 2)), keys: clusterKeys, values: clusterValues, types: clusterTypes}
	y = clus.doc()
	x, err = rw.Restore(y)
	if err != nil {
		t.Fatalf("seed %d: restore: %v\n%s", seed, err, y)
	}
	back, err = rw.Rename(x)
	if err != nil {
		t.Fatalf("seed %d: rename: %v", seed, err)
	}
	if !bytes.Equal(back, y) && !jsonEqual(t, back, y) {
		t.Fatalf("seed %d: rename(restore(y)) != y\n%s", seed, mustDiff(y, back))
	}
}

func TestPropertyRoundTrip(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	for seed := range uint64(n) {
		checkRoundTrip(t, seed)
	}
}

func FuzzRenameRestore(f *testing.F) {
	for i := range uint64(8) {
		f.Add(i)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkRoundTrip(t, seed) })
}

func FuzzObject(f *testing.F) {
	f.Add([]byte(`{"kind":"VirtualMachine","apiVersion":"kubevirt.io/v1","metadata":{"labels":{"kubevirt.io":"x"}}}`))
	f.Add([]byte(`{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"finalizers":["kubevirt.io/x"]}}]}`))
	f.Add([]byte(`{"type":"ADDED","object":{"kind":"Status","details":{"group":"kubevirt.io"}}}`))
	f.Add([]byte(`{"kind":"APIGroupList","groups":[{"name":"kubevirt.io"}]}`))
	f.Add([]byte(`{"a":[1,{"b":"\u0041\"x"}],"c":null,"d":-1.5e3}`))
	f.Add([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"managedFields":[{"fieldsV1":{"f:metadata":{"f:labels":{"f:kubevirt.io/x":{}},"f:finalizers":{"v:\"kubevirt.io/f\"":{}}},"f:spec":{"f:nodeSelector":{"f:kubevirt.io/n":{}}}}}]}}`))
	f.Add([]byte(`{"metadata":{"labels":{"kubevirt.io/u":"1"}},"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := json.Valid(data)
		for _, d := range []Direction{Rename, Restore} {
			out, err := rw.Object(d, data, Target{})
			if valid && err != nil {
				t.Fatalf("%v: valid input rejected: %v\n%q", d, err, data)
			}
			if err == nil && valid && !json.Valid(out) {
				t.Fatalf("%v: invalid output for valid input\n%q\n%q", d, data, out)
			}
			var buf bytes.Buffer
			serr := rw.ObjectStream(d, &buf, bytes.NewReader(data), Target{})
			if valid && serr != nil {
				t.Fatalf("%v: stream rejected valid input: %v\n%q", d, serr, data)
			}
			if valid && !json.Valid(buf.Bytes()) {
				t.Fatalf("%v: stream invalid output\n%q\n%q", d, data, buf.Bytes())
			}
			if _, _, err := rw.WatchEvent(d, nil, data, Target{}); valid && err != nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
				t.Fatalf("%v: watch event rejected: %v", d, err)
			}
		}
	})
}

func FuzzPatch(f *testing.F) {
	f.Add([]byte(`[{"op":"test","path":"/metadata/labels/kubevirt.io~1foo","value":"x"}]`), uint8(0))
	f.Add([]byte(`[{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"VirtualMachine"},{"op":"add","path":"/metadata/ownerReferences/0/apiVersion","value":"kubevirt.io/v1"}]`), uint8(0))
	f.Add([]byte(`{"metadata":{"$setElementOrder/finalizers":["kubevirt.io/a"]}}`), uint8(2))
	f.Add([]byte("metadata:\n  labels:\n    kubevirt.io: x\n"), uint8(3))
	cts := []string{ContentTypeJSONPatch, ContentTypeMergePatch, ContentTypeStrategicMerge, ContentTypeApplyYAML, ContentTypeApplyJSON}
	f.Fuzz(func(t *testing.T, data []byte, ct uint8) {
		c := cts[int(ct)%len(cts)]
		for _, tg := range []Target{{}, {"kubevirt.io", "VirtualMachine"}, {"", "Pod"}} {
			out, err := rw.Patch(Rename, c, data, tg)
			if err == nil && !json.Valid(out) {
				t.Fatalf("invalid output %q -> %q", data, out)
			}
			if err == nil && c == ContentTypeJSONPatch {
				back, err := rw.Patch(Restore, c, out, clusterTarget(tg))
				if err != nil {
					t.Fatalf("restore of renamed patch failed: %v", err)
				}
				_ = back
			}
		}
	})
}

func FuzzPath(f *testing.F) {
	f.Add("/apis/kubevirt.io/v1/namespaces/x/virtualmachines/y/status", "labelSelector=kubevirt.io%3Dx")
	f.Add("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualmachines.kubevirt.io", "fieldSelector=metadata.name%3Dvirtualmachines.kubevirt.io")
	f.Fuzz(func(t *testing.T, p, q string) {
		np, _ := rw.Path(Rename, p)
		if !strings.Contains(p, "internal") && !strings.Contains(p, "preserved-original-") {
			back, _ := rw.Path(Restore, np)
			if back != p {
				t.Fatalf("path round trip %q -> %q -> %q", p, np, back)
			}
		}
		ri := ParsePath(p)
		_, _ = rw.Query(Rename, ri, q)
		_, _ = rw.LabelSelector(Restore, q)
		_, _ = rw.FieldSelector(Restore, ri, q)
	})
}
