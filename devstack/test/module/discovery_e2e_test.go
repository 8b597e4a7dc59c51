package module

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// featureLabel is the prefix of the node labeller's feature labels as the cluster stores them
// (the core writes cpu-feature.node.kubevirt.io/, its rewriter renames it).
const featureLabel = "cpu-feature.node.virtualization.deckhouse.io/"

// checkDiscoveryClass checks a VirtualMachineClass of processor type Discovery on the real
// node labeller's labels: selecting the node, it becomes Ready with Discovered True and exactly
// the node's features enabled; selecting no node, it stays Pending with DiscoveryFailed saying
// why.
func checkDiscoveryClass(t *testing.T, st *stack, kc string) {
	t.Helper()
	t.Log("a Discovery VirtualMachineClass takes the features the node labeller found on its nodes")
	var want []string
	deadline := time.Now().Add(2 * time.Minute)
	for len(want) == 0 {
		var labels map[string]string
		out := st.kubectl(t, kc, "get", "node", nodeName, "-o", "jsonpath={.metadata.labels}")
		if err := json.Unmarshal([]byte(out), &labels); err != nil {
			t.Fatalf("node labels %q: %v", out, err)
		}
		for k, v := range labels {
			if f, ok := strings.CutPrefix(k, featureLabel); ok && v == "true" {
				want = append(want, f)
			}
		}
		if len(want) == 0 && time.Now().After(deadline) {
			t.Fatalf("node %s has no %s* labels: %v", nodeName, featureLabel, labels)
		}
		time.Sleep(time.Second)
	}
	sort.Strings(want)

	manifest := filepath.Join(t.TempDir(), "classes.yaml")
	classes := `apiVersion: virtualization.deckhouse.io/v1alpha3
kind: VirtualMachineClass
metadata:
  name: module-e2e-discovery
spec:
  cpu:
    type: Discovery
    discovery:
      nodeSelector:
        matchLabels:
          kubernetes.io/hostname: ` + nodeName + `
---
apiVersion: virtualization.deckhouse.io/v1alpha3
kind: VirtualMachineClass
metadata:
  name: module-e2e-discovery-none
spec:
  cpu:
    type: Discovery
    discovery:
      nodeSelector:
        matchLabels:
          kubernetes.io/hostname: no-such-node
`
	if err := os.WriteFile(manifest, []byte(classes), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", manifest)
	defer st.kubectl(t, kc, "delete", "-f", manifest, "--ignore-not-found", "--timeout=60s")
	st.kubectl(t, kc, "wait", "vmclass/module-e2e-discovery", "--for=jsonpath={.status.conditions[?(@.type=='Discovered')].status}=True", "--timeout=60s")
	st.kubectl(t, kc, "wait", "vmclass/module-e2e-discovery", "--for=jsonpath={.status.phase}=Ready", "--timeout=60s")
	var got []string
	out := st.kubectl(t, kc, "get", "vmclass/module-e2e-discovery", "-o", "jsonpath={.status.cpuFeatures.enabled}")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("status.cpuFeatures.enabled %q: %v", out, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("status.cpuFeatures.enabled %v, want the node's features %v", got, want)
	}
	t.Logf("discovered %d features on %s", len(got), nodeName)

	st.kubectl(t, kc, "wait", "vmclass/module-e2e-discovery-none", "--for=jsonpath={.status.conditions[?(@.type=='Discovered')].reason}=DiscoveryFailed", "--timeout=60s")
	none := st.kubectl(t, kc, "get", "vmclass/module-e2e-discovery-none", "-o",
		`jsonpath={.status.phase} {.status.conditions[?(@.type=='Discovered')].message}`)
	if want := "Pending no available node of the class matches spec.cpu.discovery.nodeSelector"; strings.TrimSpace(none) != want {
		t.Errorf("a Discovery class selecting no node: %q, want %q", none, want)
	}
}
