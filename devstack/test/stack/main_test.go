// Package integration proves that the local control plane is a real one: custom resources, watches,
// patches, the garbage collector of kube-controller-manager, and the aggregation layer.
package integration

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
