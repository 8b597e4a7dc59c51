package rewrite

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The same restore of a pod list as Rewriter.Object does for the places a pod list uses
// (metadata labels, annotations, finalizers and owner references; the pod spec's node selector
// and node affinity keys), written the two other ways there are: with gjson and sjson, the
// approach of the reference rewriter (find each place by path, set the rewritten value back),
// and with encoding/json (decode, rewrite the Go values, encode). BenchmarkTargets runs them in
// the same turns as the engine, so that the choice of the engine is measured.

// baselineKeys restores the keys of a map of metadata keys (and the value-rule values of labels).
func baselineKeys(rw *Rewriter, m map[string]any, labels bool) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		nk, _ := rw.rules.Key(Restore, k)
		if s, ok := v.(string); ok && labels {
			if nv, ok := rw.rules.LabelValue(Restore, nk, s); ok {
				v = nv
			}
		}
		out[nk] = v
	}
	return out
}

func baselineOwner(rw *Rewriter, o map[string]any) {
	av, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	g, v := splitGV(av)
	if nk, ok := rw.rules.Kind(Restore, g, kind); ok {
		o["kind"] = nk
	}
	if ng, ok := rw.rules.Group(Restore, g); ok {
		o["apiVersion"] = joinGV(ng, v)
	}
}

// restoreEncodingJSON is the baseline with encoding/json.
func restoreEncodingJSON(rw *Rewriter, body []byte) ([]byte, error) {
	var list map[string]any
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	items, _ := list["items"].([]any)
	for _, it := range items {
		pod, _ := it.(map[string]any)
		md, _ := pod["metadata"].(map[string]any)
		if l, ok := md["labels"].(map[string]any); ok {
			md["labels"] = baselineKeys(rw, l, true)
		}
		if a, ok := md["annotations"].(map[string]any); ok {
			md["annotations"] = baselineKeys(rw, a, false)
		}
		if fs, ok := md["finalizers"].([]any); ok {
			for i, f := range fs {
				if s, ok := f.(string); ok {
					fs[i], _ = rw.rules.Key(Restore, s)
				}
			}
		}
		if os, ok := md["ownerReferences"].([]any); ok {
			for _, o := range os {
				if om, ok := o.(map[string]any); ok {
					baselineOwner(rw, om)
				}
			}
		}
		spec, _ := pod["spec"].(map[string]any)
		if ns, ok := spec["nodeSelector"].(map[string]any); ok {
			spec["nodeSelector"] = baselineKeys(rw, ns, true)
		}
		aff, _ := spec["affinity"].(map[string]any)
		na, _ := aff["nodeAffinity"].(map[string]any)
		req, _ := na["requiredDuringSchedulingIgnoredDuringExecution"].(map[string]any)
		terms, _ := req["nodeSelectorTerms"].([]any)
		for _, term := range terms {
			tm, _ := term.(map[string]any)
			exprs, _ := tm["matchExpressions"].([]any)
			for _, e := range exprs {
				if em, ok := e.(map[string]any); ok {
					if k, ok := em["key"].(string); ok {
						em["key"], _ = rw.rules.Key(Restore, k)
					}
				}
			}
		}
	}
	return json.Marshal(list)
}

// gjsonKeys restores the keys of the metadata-key map at path of item, the sjson way.
func gjsonKeys(rw *Rewriter, item []byte, path string, labels bool) ([]byte, error) {
	m := gjson.GetBytes(item, path)
	if !m.IsObject() {
		return item, nil
	}
	out := []byte{'{'}
	changed := false
	m.ForEach(func(k, v gjson.Result) bool {
		nk, ok := rw.rules.Key(Restore, k.Str)
		changed = changed || ok
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = appendQuoted(out, nk)
		out = append(out, ':')
		if labels && v.Type == gjson.String {
			if nv, ok := rw.rules.LabelValue(Restore, nk, v.Str); ok {
				out = appendQuoted(out, nv)
				changed = true
				return true
			}
		}
		out = append(out, v.Raw...)
		return true
	})
	if !changed {
		return item, nil
	}
	return sjson.SetRawBytes(item, path, append(out, '}'))
}

// restoreGJSON is the baseline with gjson and sjson.
func restoreGJSON(rw *Rewriter, body []byte) ([]byte, error) {
	var err error
	items := []byte{'['}
	gjson.GetBytes(body, "items").ForEach(func(_, it gjson.Result) bool {
		item := []byte(it.Raw)
		for _, p := range []struct {
			path   string
			labels bool
		}{{"metadata.labels", true}, {"metadata.annotations", false}, {"spec.nodeSelector", true}} {
			if item, err = gjsonKeys(rw, item, p.path, p.labels); err != nil {
				return false
			}
		}
		gjson.GetBytes(item, "metadata.finalizers").ForEach(func(i, f gjson.Result) bool {
			if nk, ok := rw.rules.Key(Restore, f.Str); ok {
				item, err = sjson.SetBytes(item, "metadata.finalizers."+i.String(), nk)
			}
			return err == nil
		})
		gjson.GetBytes(item, "metadata.ownerReferences").ForEach(func(i, o gjson.Result) bool {
			g, v := splitGV(o.Get("apiVersion").Str)
			p := "metadata.ownerReferences." + i.String()
			if nk, ok := rw.rules.Kind(Restore, g, o.Get("kind").Str); ok {
				if item, err = sjson.SetBytes(item, p+".kind", nk); err != nil {
					return false
				}
			}
			if ng, ok := rw.rules.Group(Restore, g); ok {
				item, err = sjson.SetBytes(item, p+".apiVersion", joinGV(ng, v))
			}
			return err == nil
		})
		const terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
		gjson.GetBytes(item, terms).ForEach(func(ti, term gjson.Result) bool {
			term.Get("matchExpressions").ForEach(func(ei, e gjson.Result) bool {
				if nk, ok := rw.rules.Key(Restore, e.Get("key").Str); ok {
					item, err = sjson.SetBytes(item, terms+"."+ti.String()+".matchExpressions."+ei.String()+".key", nk)
				}
				return err == nil
			})
			return err == nil
		})
		if len(items) > 1 {
			items = append(items, ',')
		}
		items = append(items, item...)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return sjson.SetRawBytes(body, "items", append(items, ']'))
}

// TestBaselinesAgree holds the baselines to the engine's answer, so that they measure the same
// work.
func TestBaselinesAgree(t *testing.T) {
	body := podList(3)
	want, err := rw.Object(Restore, body, Target{})
	if err != nil {
		t.Fatal(err)
	}
	// The engine also restores managedFields keys, which the baselines leave out.
	var w map[string]any
	_ = json.Unmarshal(want, &w)
	for _, it := range w["items"].([]any) {
		delete(it.(map[string]any)["metadata"].(map[string]any), "managedFields")
	}
	for name, f := range map[string]func(*Rewriter, []byte) ([]byte, error){"encoding/json": restoreEncodingJSON, "gjson+sjson": restoreGJSON} {
		got, err := f(rw, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var g map[string]any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, it := range g["items"].([]any) {
			delete(it.(map[string]any)["metadata"].(map[string]any), "managedFields")
		}
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("%s restores differently from the engine:\n%s", name, mustDiff(gb, wb))
		}
		if strings.Contains(string(gb), "internal.virtualization") {
			t.Errorf("%s left internal names", name)
		}
	}
}
