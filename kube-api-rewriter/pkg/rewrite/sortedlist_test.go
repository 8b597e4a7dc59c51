package rewrite

import (
	"bytes"
	"testing"

	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// The apiserver encodes custom-resource lists with sorted keys (apiVersion, items, kind), and the
// proxy passes the item kind of the request path as the target: both paths must restore the items.
func TestRestoreListWithSortedKeys(t *testing.T) {
	rw := New(rules.Default())
	in := `{"apiVersion":"internal.virtualization.deckhouse.io/v1","items":[{"apiVersion":"internal.virtualization.deckhouse.io/v1","kind":"InternalVirtualizationVirtualMachineInstance","metadata":{"name":"farmx","labels":{"kubevirt.internal.virtualization.deckhouse.io/vm":"a"},"ownerReferences":[{"apiVersion":"internal.virtualization.deckhouse.io/v1","kind":"InternalVirtualizationVirtualMachineInstanceReplicaSet","name":"farm","uid":"u"}]}}],"kind":"InternalVirtualizationVirtualMachineInstanceList","metadata":{"resourceVersion":"1"}}`
	want := `{"apiVersion":"kubevirt.io/v1","items":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"farmx","labels":{"kubevirt.io/vm":"a"},"ownerReferences":[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstanceReplicaSet","name":"farm","uid":"u"}]}}],"kind":"VirtualMachineInstanceList","metadata":{"resourceVersion":"1"}}`
	for _, target := range []Target{{}, rw.TargetFor(Restore, ParsePath("/apis/internal.virtualization.deckhouse.io/v1/namespaces/ns/internalvirtualizationvirtualmachineinstances"))} {
		got, err := rw.Object(Restore, []byte(in), target)
		if err != nil || string(got) != want {
			t.Errorf("Object with target %+v:\n got %s (%v)\nwant %s", target, got, err, want)
		}
		var b bytes.Buffer
		if err := rw.ObjectStream(Restore, &b, bytes.NewReader([]byte(in)), target); err != nil || !jsonEqual(t, b.Bytes(), []byte(want)) {
			t.Errorf("ObjectStream with target %+v:\n got %s (%v)\nwant %s", target, b.String(), err, want)
		}
	}
}
