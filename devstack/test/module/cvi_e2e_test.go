package module

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkClusterVirtualImage checks that the chart's virtualization-controller runs with the RBAC
// it needs: a ClusterVirtualImage gets its finalizer, a status (Pending: an Upload source is not
// imported yet) and an Event, shows in `kubectl get cvi`, and is deleted (the finalizer removed).
// Imports themselves wait for Service names to resolve on the local stack
// (docs/virtualization-controller.md).
func checkClusterVirtualImage(t *testing.T, st *stack) {
	t.Helper()
	t.Log("virtualization-controller: a ClusterVirtualImage gets its finalizer, status and Event, and is deleted")
	kc := st.s.KubeconfigPath()
	manifest := filepath.Join(t.TempDir(), "cvi.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: virtualization.deckhouse.io/v1alpha2
kind: ClusterVirtualImage
metadata:
  name: module-e2e-upload
spec:
  dataSource:
    type: Upload
`), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", manifest)
	defer st.kubectl(t, kc, "delete", "-f", manifest, "--ignore-not-found", "--timeout=60s")
	st.kubectl(t, kc, "wait", "cvi/module-e2e-upload", "--for=jsonpath={.status.phase}=Pending", "--timeout=60s")
	if got := st.kubectl(t, kc, "get", "cvi/module-e2e-upload", "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, "virtualization.deckhouse.io/cvi-cleanup") {
		t.Errorf("finalizers %s", got)
	}
	msg := st.kubectl(t, kc, "get", "cvi/module-e2e-upload", "-o", `jsonpath={.status.conditions[?(@.type=="DatasourceReady")].message}`)
	if !strings.Contains(msg, "spec.dataSource.type Upload is not supported") {
		t.Errorf("DatasourceReady message %q", msg)
	}
	if out := st.kubectl(t, kc, "get", "cvi", "module-e2e-upload"); !strings.Contains(out, "PHASE") || !strings.Contains(out, "Pending") {
		t.Errorf("kubectl get cvi:\n%s", out)
	}
	if out := st.kubectl(t, kc, "get", "events", "-A", "--field-selector", "involvedObject.name=module-e2e-upload", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(out, "Pending") {
		t.Errorf("events of the image: %q", out)
	}
	st.kubectl(t, kc, "delete", "-f", manifest, "--timeout=60s")
}
