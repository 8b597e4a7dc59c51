package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testNodeLabels checks virt-handler's node labeller on a real node: the init container's libvirt
// (TCG here) gives the node KubeVirt's CPU and machine labels, the cluster stores them under the
// rewriter's renamed prefixes, and the labeller keeps its own labels level-based: a stale one of
// its prefixes goes, anyone else's stays.
func testNodeLabels(t *testing.T, c *cluster, kc client.Client, _ string) {
	node := c.nodes[0]
	var labels map[string]string
	eventually(t, 2*time.Minute, "node labels", func(ctx context.Context) error {
		n := &corev1.Node{}
		if err := kc.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		labels = n.Labels
		for _, prefix := range []string{kubevirtv1.HostModelCPULabel, kubevirtv1.CPUModelVendorLabel, kubevirtv1.CPUModelLabel,
			kubevirtv1.CPUFeatureLabel, kubevirtv1.HostModelRequiredFeaturesLabel, kubevirtv1.SupportedHostModelMigrationCPU} {
			if len(withPrefix(labels, prefix)) == 0 {
				return fmt.Errorf("no %s* label in %v", prefix, labels)
			}
		}
		return nil
	})
	for _, k := range []string{kubevirtv1.SupportedMachineTypeLabel + "q35", kubevirtv1.CPUTimerLabel + "tsc-frequency"} {
		if _, ok := labels[k]; !ok {
			t.Errorf("no label %s", k)
		}
	}
	// KubeVirt's obsolete models are never labelled, usable as they are under TCG.
	for _, m := range []string{"qemu64", "kvm64", "486"} {
		if _, ok := labels[kubevirtv1.CPUModelLabel+m]; ok {
			t.Errorf("obsolete model %s labelled", m)
		}
	}
	t.Logf("host model %v, %d models, %d features", withPrefix(labels, kubevirtv1.HostModelCPULabel),
		len(withPrefix(labels, kubevirtv1.CPUModelLabel)), len(withPrefix(labels, kubevirtv1.CPUFeatureLabel)))

	// The apiserver holds them renamed; nothing of *.node.kubevirt.io is stored.
	stored := directNode(t, c, node)
	for k := range labels {
		group, name, ok := strings.Cut(k, "/")
		if !ok || !strings.HasSuffix(group, ".node.kubevirt.io") {
			continue
		}
		renamed := strings.TrimSuffix(group, ".node.kubevirt.io") + ".node.virtualization.deckhouse.io/" + name
		if stored[renamed] != labels[k] {
			t.Errorf("stored label %s = %q, want %q (from %s)", renamed, stored[renamed], labels[k], k)
		}
	}
	for k := range stored {
		if strings.Contains(k, ".node.kubevirt.io/") {
			t.Errorf("stored label %s is not renamed", k)
		}
	}

	// Level-based: a stale label of the labeller's goes, a foreign one stays.
	stale, foreign := kubevirtv1.CPUModelLabel+"Bogus-e2e", "example.com/e2e-keep"
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true",%q:"yes"}}}`, stale, foreign)
	if err := kc.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		undo := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, foreign)
		_ = kc.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(undo)))
	})
	eventually(t, time.Minute, "stale label removed", func(ctx context.Context) error {
		n := &corev1.Node{}
		if err := kc.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if _, ok := n.Labels[stale]; ok {
			return fmt.Errorf("%s still there", stale)
		}
		if n.Labels[foreign] != "yes" {
			return fmt.Errorf("foreign label %s lost: %v", foreign, n.Labels)
		}
		return nil
	})
}

func withPrefix(labels map[string]string, prefix string) []string {
	var out []string
	for k := range labels {
		if strings.HasPrefix(k, prefix) {
			out = append(out, strings.TrimPrefix(k, prefix))
		}
	}
	return out
}

// directNode reads the Node's labels straight from the apiserver, past every rewriter.
func directNode(t *testing.T, c *cluster, name string) map[string]string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.stack.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels
}
