// Package chart tests charts/virtualization: helm lint, the rendered manifests with default and
// non-default values applied with a server-side dry run against a real apiserver (the chart's own
// CRDs installed), the properties every release of the chart must keep (metrics behind
// kube-rbac-proxy, no wildcard RBAC, virt-operator's ClusterRole exactly the renamed
// virtoperator.OperatorRules()), the values schema, and the alerts under promtool.
package chart

import (
	"testing"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}
