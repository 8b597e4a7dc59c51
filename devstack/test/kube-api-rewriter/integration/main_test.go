// Package integration runs KubeVirt-speaking clients against the real apiserver through the
// rewriter, as the sidecar and in-process, and checks both what the client sees and what the
// cluster stores.
package integration

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
