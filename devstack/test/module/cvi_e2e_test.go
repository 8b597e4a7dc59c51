package module

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkClusterVirtualImage checks that the chart's virtualization-controller runs with the RBAC
// it needs for both image kinds: a ClusterVirtualImage and a VirtualImage made from a cluster
// image that does not exist get their finalizer, a status (Pending: the source does not exist
// yet) and an Event, show in `kubectl get cvi,vi`, and are deleted (the finalizer removed).
// Imports themselves wait for Service names to resolve on the local stack
// (docs/virtualization-controller.md).
func checkClusterVirtualImage(t *testing.T, st *stack) {
	t.Helper()
	t.Log("virtualization-controller: a ClusterVirtualImage and a VirtualImage get their finalizer, status and Event, and are deleted")
	kc := st.s.KubeconfigPath()
	manifest := filepath.Join(t.TempDir(), "images.yaml")
	source := `
  dataSource:
    type: ObjectRef
    objectRef:
      kind: ClusterVirtualImage
      name: module-e2e-missing
`
	if err := os.WriteFile(manifest, []byte(`apiVersion: virtualization.deckhouse.io/v1alpha2
kind: ClusterVirtualImage
metadata:
  name: module-e2e-wait
spec:`+source+`---
apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualImage
metadata:
  name: module-e2e-wait
  namespace: default
spec:
  storage: ContainerRegistry`+source), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", manifest)
	defer st.kubectl(t, kc, "delete", "-f", manifest, "--ignore-not-found", "--timeout=60s")
	for _, obj := range []struct{ ref, short string }{{"cvi/module-e2e-wait", "cvi"}, {"vi/module-e2e-wait", "vi"}} {
		st.kubectl(t, kc, "wait", "-n", "default", obj.ref, "--for=jsonpath={.status.phase}=Pending", "--timeout=60s")
		if got := st.kubectl(t, kc, "get", "-n", "default", obj.ref, "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, "virtualization.deckhouse.io/"+obj.short+"-cleanup") {
			t.Errorf("%s: finalizers %s", obj.ref, got)
		}
		msg := st.kubectl(t, kc, "get", "-n", "default", obj.ref, "-o", `jsonpath={.status.conditions[?(@.type=="DatasourceReady")].message}`)
		if !strings.Contains(msg, "the ClusterVirtualImage module-e2e-missing of spec.dataSource.objectRef does not exist yet") {
			t.Errorf("%s: DatasourceReady message %q", obj.ref, msg)
		}
	}
	if out := st.kubectl(t, kc, "get", "-n", "default", "cvi/module-e2e-wait", "vi/module-e2e-wait", "-o", "wide"); strings.Count(out, "Pending") != 2 || !strings.Contains(out, "PHASE") || !strings.Contains(out, "REGISTRY URL") {
		t.Errorf("kubectl get cvi,vi:\n%s", out)
	}
	if out := st.kubectl(t, kc, "get", "events", "-A", "--field-selector", "involvedObject.name=module-e2e-wait", "-o", "jsonpath={.items[*].reason}"); strings.Count(out, "Pending") < 2 {
		t.Errorf("events of the images: %q", out)
	}
	st.kubectl(t, kc, "delete", "-f", manifest, "--timeout=60s")
}
