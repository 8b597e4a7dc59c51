package vm

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// TestStartRequestBesideTheCoresStatus: the start request goes onto an internal VM whose status
// virt-controller has written since the controller's cache saw it (no conflict, and the core's
// status stays), and never over a request somebody else put there meanwhile.
func TestStartRequestBesideTheCoresStatus(t *testing.T) {
	ctx := context.Background()
	vm := reconcilerVM()
	vm.Spec.RunPolicy = v1alpha2.AlwaysOnPolicy
	internal := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Status: kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped}}
	w := newWorld(t, vm, internal)
	stale := w.internal()
	// virt-controller writes the status after the cache's copy.
	core := stale.DeepCopy()
	core.Status.PrintableStatus = kubevirtv1.VirtualMachineStatusProvisioning
	if err := w.c.Status().Update(ctx, core); err != nil {
		t.Fatal(err)
	}
	if err := w.r.power(ctx, &StatusInputs{VM: vm, Internal: stale.DeepCopy()}); err != nil {
		t.Fatalf("start request on a status written meanwhile: %v", err)
	}
	got := w.internal()
	if len(got.Status.StateChangeRequests) != 1 || got.Status.StateChangeRequests[0].Action != kubevirtv1.StartRequest ||
		got.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusProvisioning {
		t.Fatalf("internal VM status %+v: want the start request beside the core's printable status", got.Status)
	}
	// A request that arrived after the cache's copy (the core's own, a user's through virt-api)
	// is not overwritten.
	if err := w.r.power(ctx, &StatusInputs{VM: vm, Internal: stale.DeepCopy()}); err == nil {
		t.Error("a second request went over the first")
	}
	if n := len(w.internal().Status.StateChangeRequests); n != 1 {
		t.Errorf("%d requests after the refused one, want the first alone", n)
	}
}
