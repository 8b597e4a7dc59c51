package virtlauncher

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	dir, capsDir := t.TempDir(), t.TempDir()
	argv := append(wrap, launcherBinary(t), "--node-labeller-dir", dir, "--qemu-capabilities-dir", capsDir, "--emulation")
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
	// Its libvirtd probed QEMU to answer (the emulators of every architecture it has, for the
	// host capabilities), and left the answers for the node's launchers.
	saved, _ := filepath.Glob(filepath.Join(capsDir, "*.xml"))
	found := false
	for _, f := range saved {
		b, err := os.ReadFile(f)
		if err != nil || !strings.HasPrefix(string(b), "<qemuCaps>") {
			t.Errorf("%s is not libvirt's QEMU capabilities cache: %v", f, err)
		}
		found = found || strings.Contains(string(b), "<emulator>/usr/bin/qemu-system-"+launcherapi.Arch()+"</emulator>")
	}
	if !found {
		t.Errorf("no QEMU capabilities of qemu-system-%s among the saved %v", launcherapi.Arch(), saved)
	}
}
