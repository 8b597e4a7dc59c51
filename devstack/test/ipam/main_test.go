// Package ipam checks virtualization-controller's IP address management and webhooks against the
// real apiserver: the reconcilers and the webhook server run in the test binary (the webhook
// server on the bridge address, which the apiserver reaches), the objects live in the
// apiserver. 100 addresses created at once get 100 distinct addresses, a static address outside
// the range is denied through kubectl, an address survives a restart of the controller, and the
// apiserver converts VirtualMachineClass between v1alpha2 and v1alpha3 through the webhook.
//
// On a shared stack: every namespaced object lives in the test's namespace, the webhook
// configuration selects only that namespace, the leases are of a range no other test uses and
// are deleted at the end, and the CRD's conversion is set back to None when the test ends.
package ipam

import (
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/d8virt/devstack/testenv"
)

func TestMain(m *testing.M) {
	// Each manager logs through its test (testr); the process-wide logger stays quiet.
	ctrl.SetLogger(logr.Discard())
	testenv.Main(m)
}
