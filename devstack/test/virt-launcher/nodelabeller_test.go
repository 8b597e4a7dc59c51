package virtlauncher

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/nodecaps"
)

// TestNodeLabellerMode runs the handler Pod's init container as a kubelet runs a container (the
// launcher's own libvirtd in a private mount namespace) and reads what it wrote back through the
// files' contract, as virt-handler does.
func TestNodeLabellerMode(t *testing.T) {
	needRoot(t)
	wrap, env := podSandbox(t, "", "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	argv := append(wrap, launcherBinary(t), "--node-labeller-dir", dir, "--emulation")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("virt-launcher --node-labeller-dir: %v\n%s", err, out)
	}
	caps, err := nodecaps.Load(dir, launcherapi.Arch())
	if err != nil {
		t.Fatal(err)
	}
	if caps.HostModel == "" || caps.Vendor == "" || len(caps.UsableModels) == 0 || len(caps.Features) == 0 || len(caps.Machines) == 0 {
		t.Errorf("little known about this node: %+v", caps)
	}
	// The guests' machine type must be among those the node is labelled with.
	if !slices.Contains(caps.Machines, "q35") {
		t.Errorf("no q35 among the machine types %v", caps.Machines)
	}
}
