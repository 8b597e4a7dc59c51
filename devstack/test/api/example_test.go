package api

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/testenv"
)

// The example `make run` creates (examples/vm.yaml, as module.Example fills it in) is accepted by
// the real apiserver with the friendly CRDs: a server-side dry run, so nothing stays on a shared
// stack.
func TestExampleAccepted(t *testing.T) {
	env, _ := setup(t)
	objs, err := module.Example(module.ExampleFile(repoRoot(t)), []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := module.Manifest(objs)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "example.json")
	if err := os.WriteFile(file, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	out := testenv.Kubectl(t, env.Kubeconfig, "apply", "--dry-run=server", "--server-side", "-f", file)
	for _, want := range []string{"clustervirtualimage.virtualization.deckhouse.io/tiny-guest", "virtualmachineclass.virtualization.deckhouse.io/example",
		"virtualdisk.virtualization.deckhouse.io/example-root", "virtualmachineipaddress.virtualization.deckhouse.io/example", "virtualmachine.virtualization.deckhouse.io/example"} {
		if !strings.Contains(out, want+" serverside-applied (server dry run)") {
			t.Errorf("kubectl apply --dry-run=server does not accept %s:\n%s", want, out)
		}
	}
}
