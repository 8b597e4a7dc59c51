package nodelabeller

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/d8virt/kubevirt-core/pkg/nodecaps"
)

// loadTestdata reads nodecaps' captured files (AMD EPYC, nested, virttype qemu).
func loadTestdata(t *testing.T) *nodecaps.Capabilities {
	t.Helper()
	c, err := nodecaps.Load(filepath.Join("..", "..", "nodecaps", "testdata"), "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLabels(t *testing.T) {
	captured := loadTestdata(t)
	for _, tc := range []struct {
		name     string
		caps     *nodecaps.Capabilities
		obsolete map[string]bool
		realtime bool
		has      map[string]string
		lacks    []string
	}{
		{
			name: "captured node",
			caps: captured,
			has: map[string]string{
				"cpu-model.node.kubevirt.io/Penryn":                 "true",
				"cpu-model.node.kubevirt.io/Westmere":               "true",
				"cpu-model-migration.node.kubevirt.io/Penryn":       "true",
				"cpu-model-migration.node.kubevirt.io/EPYC":         "true",
				"cpu-feature.node.kubevirt.io/avx2":                 "true",
				"host-model-cpu.node.kubevirt.io/EPYC":              "true",
				"host-model-required-features.node.kubevirt.io/npt": "true",
				"cpu-vendor.node.kubevirt.io/AMD":                   "true",
				"cpu-timer.node.kubevirt.io/tsc-frequency":          "2445424000",
				"cpu-timer.node.kubevirt.io/tsc-scalable":           "false",
				"machine-type.node.kubevirt.io/q35":                 "true",
			},
			// Obsolete models by default, unusable ones, disabled features.
			lacks: []string{"cpu-model.node.kubevirt.io/qemu64", "cpu-model.node.kubevirt.io/486",
				"cpu-model.node.kubevirt.io/Conroe", "cpu-model-migration.node.kubevirt.io/kvm64",
				"cpu-model.node.kubevirt.io/phenom", "cpu-model.node.kubevirt.io/EPYC",
				"cpu-feature.node.kubevirt.io/3dnowprefetch", "node-labeller.kubevirt.io/obsolete-host-model",
				"kubevirt.io/realtime", "kubevirt.io/sev"},
		},
		{
			name:     "obsolete host model, own list",
			caps:     &nodecaps.Capabilities{HostModel: "Penryn", Vendor: "Intel", UsableModels: []string{"Penryn", "qemu64"}},
			obsolete: map[string]bool{"Penryn": true},
			has: map[string]string{
				"node-labeller.kubevirt.io/obsolete-host-model": "true",
				"host-model-cpu.node.kubevirt.io/Penryn":        "true",
				"cpu-model.node.kubevirt.io/qemu64":             "true",
			},
			lacks: []string{"cpu-model.node.kubevirt.io/Penryn", "cpu-model-migration.node.kubevirt.io/Penryn"},
		},
		{
			name:     "realtime and sev, no host model",
			caps:     &nodecaps.Capabilities{SEV: true, SEVES: true},
			realtime: true,
			has:      map[string]string{"kubevirt.io/realtime": "", "kubevirt.io/sev": "", "kubevirt.io/sev-es": ""},
			lacks:    []string{"cpu-vendor.node.kubevirt.io/", "host-model-cpu.node.kubevirt.io/"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Labels(tc.caps, tc.obsolete, tc.realtime)
			for k, v := range tc.has {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (present %v), want %q", k, g, ok, v)
				}
			}
			for _, k := range tc.lacks {
				if _, ok := got[k]; ok {
					t.Errorf("%s should not be set", k)
				}
			}
			for k := range got {
				if !Owned(k) {
					t.Errorf("%s is not a key the labeller owns: it could never be removed", k)
				}
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name          string
		current, want map[string]string
		changes       map[string]*string
	}{
		{"in sync", map[string]string{"cpu-model.node.kubevirt.io/A": "true", "other": "x"},
			map[string]string{"cpu-model.node.kubevirt.io/A": "true"}, map[string]*string{}},
		{"adds missing, fixes values", map[string]string{"cpu-timer.node.kubevirt.io/tsc-frequency": "1"},
			map[string]string{"cpu-timer.node.kubevirt.io/tsc-frequency": "2", "cpu-model.node.kubevirt.io/B": "true"},
			map[string]*string{"cpu-timer.node.kubevirt.io/tsc-frequency": ptr("2"), "cpu-model.node.kubevirt.io/B": ptr("true")}},
		{"removes stale own labels only", map[string]string{
			"cpu-model.node.kubevirt.io/Gone": "true", "kubevirt.io/sev": "", "kubevirt.io/schedulable": "true",
			"cpu-model.node.example.com/x": "true", "kubernetes.io/hostname": "n",
		}, map[string]string{}, map[string]*string{"cpu-model.node.kubevirt.io/Gone": nil, "kubevirt.io/sev": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Changes(tc.current, tc.want)
			if !maps.EqualFunc(got, tc.changes, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }) {
				t.Errorf("got %v, want %v", show(got), show(tc.changes))
			}
		})
	}
}

func show(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v == nil {
			out[k] = "<remove>"
		} else {
			out[k] = *v
		}
	}
	return out
}

func TestSync(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		"cpu-model.node.kubevirt.io/Stale": "true", "kubernetes.io/hostname": "n1",
	}}}
	kube := fake.NewClientset(node)
	rt := filepath.Join(t.TempDir(), "sched_rt_runtime_us")
	if err := os.WriteFile(rt, []byte("-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &Labeller{Kube: kube, NodeName: "n1", Caps: loadTestdata(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RealtimeFile: rt}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := Labels(l.Caps, nil, true)
	want["kubernetes.io/hostname"] = "n1"
	if !maps.Equal(got.Labels, want) {
		t.Errorf("labels after a sync:\n got %v\nwant %v", got.Labels, want)
	}

	// A skipped node is left as it is.
	got.Annotations = map[string]string{"node-labeller.kubevirt.io/skip-node": ""}
	got.Labels = map[string]string{"cpu-model.node.kubevirt.io/Stale": "true"}
	if _, err := kube.CoreV1().Nodes().Update(context.Background(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ = kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if !maps.Equal(got.Labels, map[string]string{"cpu-model.node.kubevirt.io/Stale": "true"}) {
		t.Errorf("skipped node relabelled: %v", got.Labels)
	}
}

// TestRunFixesDriftAtOnce: a stale label of the labeller's keys added to the Node goes without
// waiting for the next round (the Interval is an hour here), a foreign one stays.
func TestRunFixesDriftAtOnce(t *testing.T) {
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	l := &Labeller{Kube: kube, NodeName: "n1", Caps: loadTestdata(t), Interval: time.Hour, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	want := Labels(l.Caps, nil, false)
	labelled := func(extra map[string]string) bool {
		n, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := maps.Clone(want)
		maps.Copy(w, extra)
		return maps.Equal(n.Labels, w)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s", what)
			}
		}
	}
	waitFor("the first round", func() bool { return labelled(nil) })
	// The watch may not be open yet when the first round ends; keep changing until it sees one.
	waitFor("the stale label removed", func() bool {
		n, _ := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if _, stale := n.Labels["cpu-model.node.kubevirt.io/Bogus"]; !stale && n.Labels["example.com/keep"] == "yes" {
			return labelled(map[string]string{"example.com/keep": "yes"})
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["cpu-model.node.kubevirt.io/Bogus"] = "true"
		n.Labels["example.com/keep"] = "yes"
		if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		n, _ = kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		_, stale := n.Labels["cpu-model.node.kubevirt.io/Bogus"]
		return !stale && labelled(map[string]string{"example.com/keep": "yes"})
	})
}
