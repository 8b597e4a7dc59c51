package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// startsPaused waits for the VM's VMI to carry startStrategy Paused with the start request
// consumed and the VM switched to want.
func startsPaused(fx *fixture, ns, name string, want kubevirtv1.VirtualMachineRunStrategy) func(context.Context) error {
	return func(ctx context.Context) error {
		var vm kubevirtv1.VirtualMachine
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
			return err
		}
		if s, _ := vm.RunStrategy(); s != want || len(vm.Status.StateChangeRequests) > 0 {
			return fmt.Errorf("runStrategy %s, requests %+v", s, vm.Status.StateChangeRequests)
		}
		var vmi kubevirtv1.VirtualMachineInstance
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
			return err
		}
		if !vmi.ShouldStartPaused() {
			return fmt.Errorf("VMI startStrategy %v", vmi.Spec.StartStrategy)
		}
		return nil
	}
}

// start with paused, as virtctl start --paused sends it: a Halted VM is switched on and its VMI
// starts paused and stays (it was deleted again at once before); a Manual VM's request creates a
// paused VMI.
func TestStartPaused(t *testing.T) {
	fx := setup(t)
	startVirtAPI(t, fx)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	for name, strategy := range map[string]kubevirtv1.VirtualMachineRunStrategy{"halted": kubevirtv1.RunStrategyHalted, "manual": kubevirtv1.RunStrategyManual} {
		if err := fx.client.Create(ctx, newVM(ns, name, strategy)); err != nil {
			t.Fatal(err)
		}
		eventually(t, name+" stopped", vmStatus(fx, ns, name, kubevirtv1.VirtualMachineStatusStopped))
		if code, msg := command(t, fx.sidecar, ns, "virtualmachines", name, "start", `{"paused":true}`); code != http.StatusAccepted {
			t.Fatalf("start %s paused: %d %q", name, code, msg)
		}
	}
	eventually(t, "halted VM on and its VMI paused", startsPaused(fx, ns, "halted", kubevirtv1.RunStrategyAlways))
	eventually(t, "manual VM's VMI paused", startsPaused(fx, ns, "manual", kubevirtv1.RunStrategyManual))
	var first kubevirtv1.VirtualMachineInstance
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "halted"}, &first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	var vmi kubevirtv1.VirtualMachineInstance
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "halted"}, &vmi); err != nil || vmi.UID != first.UID || vmi.DeletionTimestamp != nil {
		t.Fatalf("the paused VMI did not stay: %v, UID %s then %s, deleting %v", err, first.UID, vmi.UID, vmi.DeletionTimestamp)
	}
}
