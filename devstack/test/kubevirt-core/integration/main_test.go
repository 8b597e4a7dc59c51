// Package integration runs the core's controllers against the real apiserver, each behind a real
// kube-api-rewriter sidecar as in production: they speak kubevirt.io, the cluster holds only the
// renamed kinds.
package integration

import (
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) {
	// The controllers' logs say nothing the assertions do not; without a logger controller-runtime
	// prints a stack trace instead when the control plane stops under a watch.
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}
