package vmisync

import (
	"context"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// The launcher's versions reach the VMI's annotations even when its status stays the same.
func TestWriteStatusStoresTheVersions(t *testing.T) {
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", Annotations: map[string]string{"keep": "me"}},
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	r := NewReconciler(fakeClient(t, v), "n1", t.TempDir(), clocktesting.NewFakePassiveClock(time.Now()), events.NewFakeRecorder(10), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(v), v); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"keep": "me", launcherapi.AnnotationQEMUVersion: "9.2.0", launcherapi.AnnotationLibvirtVersion: "10.10.0"}
	if err := r.writeStatus(ctx, v, v.Status, want); err != nil {
		t.Fatal(err)
	}
	got := &kubevirtv1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(v), got); err != nil {
		t.Fatal(err)
	}
	for k, val := range want {
		if got.Annotations[k] != val {
			t.Errorf("annotation %s = %q, want %q (all: %v)", k, got.Annotations[k], val, got.Annotations)
		}
	}
}
