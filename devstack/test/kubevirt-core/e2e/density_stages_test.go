package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// stageSource is a resource whose watch events mark stages of a VM's start: stages names the
// VM an object belongs to and the stages the object shows (each recorded the first time seen).
type stageSource struct {
	gvr    schema.GroupVersionResource
	stages func(o *unstructured.Unstructured) (vm string, stages []string)
}

var (
	internalGVR = func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: internalGroup, Version: "v1", Resource: r}
	}
	friendlyGVR = func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: friendlyGroup, Version: "v1alpha2", Resource: r}
	}
)

// phaseStages names an object after itself: created, then "<prefix> <status.phase>".
func phaseStages(prefix string) func(o *unstructured.Unstructured) (string, []string) {
	return func(o *unstructured.Unstructured) (string, []string) {
		out := []string{prefix + " created"}
		if p, _, _ := unstructured.NestedString(o.Object, "status", "phase"); p != "" {
			out = append(out, prefix+" "+p)
		}
		return o.GetName(), out
	}
}

// launcherVM is the VM of a launcher Pod's name, virt-launcher-<vm>-<suffix>.
func launcherVM(pod string) string {
	name := strings.TrimPrefix(pod, "virt-launcher-")
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		name = name[:i]
	}
	return name
}

// coreStageSources are what a core VM's start goes through: the VMI, its launcher Pod and the
// Pod's events (the node's Pulling, Pulled, Started, ...).
var coreStageSources = []stageSource{
	{gvr: internalGVR("internalvirtualizationvirtualmachineinstances"), stages: phaseStages("vmi")},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, stages: func(o *unstructured.Unstructured) (string, []string) {
		return phaseStages("pod")(&unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": launcherVM(o.GetName())}, "status": o.Object["status"]}})
	}},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "events"}, stages: func(o *unstructured.Unstructured) (string, []string) {
		kind, _, _ := unstructured.NestedString(o.Object, "involvedObject", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "involvedObject", "name")
		reason, _, _ := unstructured.NestedString(o.Object, "reason")
		if kind != "Pod" || reason == "" {
			return "", nil
		}
		return launcherVM(name), []string{"pod event " + reason}
	}},
}

// friendlyStageSources add the friendly VM, its address and the internal VM the controller makes.
var friendlyStageSources = append([]stageSource{
	{gvr: friendlyGVR("virtualmachines"), stages: phaseStages("vm")},
	{gvr: friendlyGVR("virtualmachineipaddresses"), stages: func(o *unstructured.Unstructured) (string, []string) {
		out := []string{"vmip created"}
		if a, _, _ := unstructured.NestedString(o.Object, "status", "address"); a != "" {
			out = append(out, "vmip has an address")
		}
		return o.GetName(), out
	}},
	{gvr: internalGVR("internalvirtualizationvirtualmachines"), stages: func(o *unstructured.Unstructured) (string, []string) {
		out := []string{"internal vm created"}
		if reqs, _, _ := unstructured.NestedSlice(o.Object, "status", "stateChangeRequests"); len(reqs) > 0 {
			out = append(out, "internal vm start requested")
		}
		return o.GetName(), out
	}},
}, coreStageSources...)

// stageTimes records, for each VM, when each stage of its start was first seen.
type stageTimes struct {
	mu   sync.Mutex
	seen map[string]map[string]time.Time
}

// watchStages watches the sources in ns until ctx ends, recording stages as they show.
func watchStages(ctx context.Context, dyn dynamic.Interface, ns string, sources []stageSource) (*stageTimes, error) {
	st := &stageTimes{seen: map[string]map[string]time.Time{}}
	for _, s := range sources {
		w, err := dyn.Resource(s.gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", s.gvr.Resource, err)
		}
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				o, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				if vm, stages := s.stages(o); vm != "" {
					st.record(vm, stages, time.Now())
				}
			}
		}()
	}
	return st, nil
}

func (st *stageTimes) record(vm string, stages []string, at time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := st.seen[vm]
	if m == nil {
		m = map[string]time.Time{}
		st.seen[vm] = m
	}
	for _, s := range stages {
		if _, ok := m[s]; !ok {
			m[s] = at
		}
	}
}

// summary lists each stage seen for every VM with its p50 and max time from start, earliest
// first.
func (st *stageTimes) summary(start time.Time) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	byStage := map[string][]time.Duration{}
	for _, m := range st.seen {
		for s, at := range m {
			byStage[s] = append(byStage[s], at.Sub(start))
		}
	}
	type row struct {
		stage    string
		p50, max time.Duration
		n        int
	}
	var rows []row
	for s, ds := range byStage {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		rows = append(rows, row{stage: s, p50: ds[len(ds)/2], max: ds[len(ds)-1], n: len(ds)})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].p50 < rows[j].p50 })
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "\n    %-30s p50 %5.1fs  max %5.1fs  (%d VMs)", r.stage, r.p50.Seconds(), r.max.Seconds(), r.n)
	}
	return b.String()
}

// TestStageSummary checks the order and figures of a stage summary.
func TestStageSummary(t *testing.T) {
	start := time.Unix(1000, 0)
	st := &stageTimes{seen: map[string]map[string]time.Time{}}
	st.record("a", []string{"vmi created", "vmi Running"}, start.Add(2*time.Second))
	st.record("a", []string{"vmi created", "vmi Running"}, start.Add(9*time.Second)) // seen before: kept
	st.record("b", []string{"vmi created"}, start.Add(1*time.Second))
	st.record("b", []string{"vmi Running"}, start.Add(5*time.Second))
	got := st.summary(start)
	want := "\n    vmi created                    p50   2.0s  max   2.0s  (2 VMs)" +
		"\n    vmi Running                    p50   5.0s  max   5.0s  (2 VMs)"
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}
