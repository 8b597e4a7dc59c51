package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d8virt/hack/pkg/core"
	"github.com/d8virt/hack/pkg/stack"
	"github.com/d8virt/hack/pkg/testenv"
)

// What `make run` does, on a stack of its own: the control plane, the CRDs, kubevirt-core with a
// rewriter in front of each component, and the example VM driven with kubectl in KubeVirt's names.
func TestCoreOnTheLocalStack(t *testing.T) {
	env := testenv.Get(t)
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/",
		"./kube-api-rewriter/cmd/kube-api-rewriter", "./kubevirt-core/cmd/virt-controller", "./kubevirt-core/cmd/virt-api")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the core: %v\n%s", err, out)
	}

	base, err := testenv.FreePortBase(env.Net)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.New(stack.Config{StateDir: t.TempDir(), BinDir: stack.BinDir(), PortBase: base, Net: env.Net})
	if err != nil {
		t.Fatal(err)
	}
	coreOpts := core.Options{BinDir: bin, Stack: s, HostName: "core-test"}
	t.Cleanup(func() {
		if err := s.Down(true); err != nil {
			t.Errorf("down: %v", err)
		}
		if err := core.Down(env.Net, coreOpts); err != nil {
			t.Errorf("core down: %v", err)
		}
	})
	ctx := testenv.Context(t)
	if err := s.Up(ctx); err != nil {
		t.Fatalf("control plane: %v", err)
	}
	if out, err := testenv.KubectlInput(t, s.KubeconfigPath(), "", "apply", "--server-side", "-R", "-f", filepath.Join(repo, "crds")); err != nil {
		t.Fatalf("apply CRDs: %v\n%s", err, out)
	}

	if coreOpts.PortBase, err = testenv.FreePortBase(env.Net); err != nil {
		t.Fatal(err)
	}
	cs, err := core.Components(coreOpts)
	if err != nil {
		t.Fatal(err)
	}
	s.AddComponents(cs...)
	if err := s.Up(ctx); err != nil {
		logs, _ := os.ReadDir(filepath.Join(s.Config().StateDir, "logs"))
		t.Fatalf("core: %v (logs: %v)", err, logs)
	}

	kv := core.KubeconfigPath(s)
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
