package vm

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// requestsPatch puts state change requests on an internal VM that has none, as KubeVirt's
// virt-api does for start and stop: a JSON patch that tests the requests are still absent,
// rather than an update of the whole status guarded by the resourceVersion the cache had.
// virt-controller writes the internal VM's status while it starts (printable status,
// conditions), and each of those writes made such an update fail with a conflict (1.6 per
// start in make bench-vms).
func requestsPatch(requests []kubevirtv1.VirtualMachineStateChangeRequest) (client.Patch, error) {
	b, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/status/stateChangeRequests", "value": nil},
		{"op": "add", "path": "/status/stateChangeRequests", "value": requests},
	})
	if err != nil {
		return nil, fmt.Errorf("state change requests patch: %w", err)
	}
	return client.RawPatch(types.JSONPatchType, b), nil
}
