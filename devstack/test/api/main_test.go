// Package api checks the friendly CRDs of virtualization.deckhouse.io (generated from the api
// module) against the real apiserver: objects made with the generated typed clientset, the CEL
// rules' denials, `kubectl explain` and `kubectl get` columns.
//
// The CRDs are cluster-wide and identical to the chart's copies, so the test creates or updates
// them and leaves them installed for other test binaries of a shared stack; every object it makes
// lives in its own namespace or carries a random name, and is deleted when the test ends.
package api

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
