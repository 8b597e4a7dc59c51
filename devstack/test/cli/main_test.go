// Package cli runs the built command-line client d8v (virtualization-api/cmd/d8v), and the same
// binary as the kubectl plugin `kubectl virtualization`, against a cluster with the module
// installed from the chart (devstack/moduletest: the suite's shared one, or a private one) and a
// friendly VirtualMachine booting the tiny guest (devstack/friendlyvm). It boots a VM, so it holds
// the machine-wide lock:
//
//	flock /tmp/vm-boot.lock go test -count=1 -v ./devstack/test/cli/
package cli

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}
