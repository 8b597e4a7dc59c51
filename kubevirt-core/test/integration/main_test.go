// Package integration runs the core's controllers against the real apiserver, each behind a real
// kube-api-rewriter sidecar as in production: they speak kubevirt.io, the cluster holds only the
// renamed kinds.
package integration

import (
	"testing"

	"github.com/d8virt/hack/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
