package module

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// vmopManifest is a Start of the VM %s, which its runPolicy AlwaysOn refuses.
const vmopManifest = `apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachineOperation
metadata:
  name: module-e2e-start
  namespace: default
spec:
  type: Start
  virtualMachineName: %s
`

// checkVMOPMetric: Prometheus scrapes virtualization-controller's operation phase gauge, one
// series per phase, 1 for the operation's phase (Failed: the running AlwaysOn VM vm refuses a
// Start) and 0 for the others; the operation's series go when it is deleted.
func checkVMOPMetric(t *testing.T, ctx context.Context, st *stack, vm string) {
	t.Helper()
	t.Log("Prometheus: the VirtualMachineOperation phase metric")
	kc := st.s.KubeconfigPath()
	file := filepath.Join(t.TempDir(), "vmop.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, vmopManifest, vm), 0o600); err != nil {
		t.Fatal(err)
	}
	st.kubectl(t, kc, "apply", "-f", file)
	defer st.kubectl(t, kc, "delete", "-f", file, "--ignore-not-found", "--timeout=1m")
	st.kubectl(t, kc, "-n", "default", "wait", "vmop/module-e2e-start", "--for=jsonpath={.status.phase}=Failed", "--timeout=1m")

	prom := st.prometheus(t, ctx).client
	series := `d8_virtualization_virtualmachineoperation_status_phase{name="module-e2e-start"`
	waitSeries(t, ctx, prom, series+`, phase="Failed"} == 1`)
	for _, phase := range []string{"Pending", "InProgress", "Completed", "Terminating", "Superseded"} {
		waitSeries(t, ctx, prom, series+`, phase="`+phase+`"} == 0`)
	}
	st.kubectl(t, kc, "delete", "-f", file, "--timeout=1m")
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := prom.Query(ctx, series+`}`)
		if err == nil && len(res) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted operation's series: %v, %d left", err, len(res))
		}
		time.Sleep(2 * time.Second)
	}
}
