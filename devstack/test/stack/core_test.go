package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/devstack/coretest"
	"github.com/d8virt/devstack/testenv"
)

// What `make run` does, on a stack of its own: the control plane, the CRDs, kubevirt-core with a
// rewriter in front of each component, and the example VM driven with kubectl in KubeVirt's names.
func TestCoreOnTheLocalStack(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	c := coretest.Start(t, coretest.Config{Repo: repo, HostName: "core-test"})
	s := c.Stack
	kv := c.Kubevirt
	if out, err := testenv.KubectlInput(t, kv, "", "apply", "-f", filepath.Join(repo, "examples", "vm.yaml")); err != nil {
		t.Fatalf("apply the example VM through the rewriter: %v\n%s", err, out)
	}
	status := func(want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err := testenv.KubectlInput(t, kv, "", "get", "vm", "demo", "-n", "default", "-o", "jsonpath={.status.printableStatus}")
			if err == nil && out == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("VM status %q (%v), want %q", out, err, want)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// No node runs pods on the local stack yet: the VM waits for one, as KubeVirt reports it.
	status("ErrorUnschedulable")
	if out, err := testenv.KubectlInput(t, s.KubeconfigPath(), "", "get", "intvirtvm", "demo", "-n", "default", "-o", "name"); err != nil ||
		!strings.Contains(out, "internalvirtualizationvirtualmachine.internal.virtualization.deckhouse.io/demo") {
		t.Errorf("the cluster does not hold the renamed VM: %v\n%s", err, out)
	}
	// virt-api answers through the apiserver's aggregation layer and its own rewriter.
	stop := "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/demo/stop"
	if out, err := testenv.KubectlInput(t, kv, "{}", "replace", "--raw", stop, "-f", "-"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	status("Stopped")
	if out, err := testenv.KubectlInput(t, kv, "{}", "replace", "--raw", stop, "-f", "-"); err == nil || !strings.Contains(out, "VM is not running") {
		t.Errorf("second stop: %v\n%s", err, out)
	}
}
