// Package cli runs the built command-line client d8v (virtualization-api/cmd/d8v), and the same
// binary as the kubectl plugin `kubectl virtualization`, against a cluster with the module
// installed from the chart (devstack/moduletest: the suite's shared one, or a private one) and a
// friendly VirtualMachine of the tiny guest (devstack/friendlyvm), as a user bound to the stock
// edit role. The tests share one cluster and machine (the fixture, taken on first use and removed
// after the last test; two nodes, for a migration). TestClientRefusals boots no VM; TestClientOnAGuest boots it, so it holds
// the machine-wide lock:
//
//	go test -count=1 -v ./devstack/test/cli/ -run TestClientRefusals
//	flock /tmp/vm-boot.lock go test -count=1 -v ./devstack/test/cli/
package cli

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, stopShared)
}
