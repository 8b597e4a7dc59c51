// Package storage tests the local stack's volumes: the local-provisioner that every stack runs
// (the default StorageClass local) and the node agent that gives them to pods, on a node agent
// of the test's own.
package storage

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
