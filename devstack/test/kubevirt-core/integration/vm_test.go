package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

func newVM(ns, name string, strategy kubevirtv1.VirtualMachineRunStrategy) *kubevirtv1.VirtualMachine {
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &strategy,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/domain": name}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
					Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resourceQuantity("128Mi")}},
				}},
			},
		},
	}
}

// eventually polls cond until it holds, reporting its last complaint.
func eventually(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

func vmStatus(fx *fixture, ns, name string, want kubevirtv1.VirtualMachinePrintableStatus) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var vm kubevirtv1.VirtualMachine
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
			return err
		}
		if vm.Status.PrintableStatus != want {
			return fmt.Errorf("printableStatus %q, want %q", vm.Status.PrintableStatus, want)
		}
		return nil
	}
}

// setVMIPhase plays virt-handler's part, which the node issue brings: the VMI has no status
// subresource, so a plain update carries the phase.
func setVMIPhase(t *testing.T, fx *fixture, ns, name string, phase kubevirtv1.VirtualMachineInstancePhase, ready bool) {
	t.Helper()
	eventually(t, "update VMI phase", func(ctx context.Context) error {
		var vmi kubevirtv1.VirtualMachineInstance
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
			return err
		}
		vmi.Status.Phase = phase
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: status}}
		return fx.client.Update(ctx, &vmi)
	})
}

func TestVMLifecycleAlwaysHaltedDelete(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	if err := fx.client.Create(ctx, newVM(ns, "demo", kubevirtv1.RunStrategyAlways)); err != nil {
		t.Fatal(err)
	}

	var vmi kubevirtv1.VirtualMachineInstance
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vmi)
	})
	if len(vmi.OwnerReferences) != 1 || vmi.OwnerReferences[0].Kind != "VirtualMachine" || vmi.Labels["kubevirt.io/domain"] != "demo" {
		t.Errorf("VMI metadata %+v", vmi.ObjectMeta)
	}
	// There is no schedulable node in this cluster, and KubeVirt ranks that above Starting.
	eventually(t, "VM unschedulable", vmStatus(fx, ns, "demo", kubevirtv1.VirtualMachineStatusUnschedulable))

	// The cluster holds the renamed kinds, labels and finalizers.
	direct, err := fx.env.Dynamic.Resource(internalVMIs).Namespace(ns).Get(ctx, "demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if direct.GetKind() != "InternalVirtualizationVirtualMachineInstance" ||
		direct.GetOwnerReferences()[0].Kind != "InternalVirtualizationVirtualMachine" ||
		direct.GetFinalizers()[0] != "kubevirt.internal.virtualization.deckhouse.io/virtualMachineControllerFinalize" ||
		direct.GetLabels()["kubevirt.internal.virtualization.deckhouse.io/created-by"] == "" {
		t.Errorf("stored VMI %s owner %v finalizers %v labels %v", direct.GetKind(), direct.GetOwnerReferences(), direct.GetFinalizers(), direct.GetLabels())
	}

	setVMIPhase(t, fx, ns, "demo", kubevirtv1.Running, true)
	eventually(t, "VM running", vmStatus(fx, ns, "demo", kubevirtv1.VirtualMachineStatusRunning))
	var vm kubevirtv1.VirtualMachine
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vm); err != nil {
		t.Fatal(err)
	}
	if !vm.Status.Ready || !vm.Status.Created {
		t.Errorf("status ready=%v created=%v", vm.Status.Ready, vm.Status.Created)
	}

	halted := kubevirtv1.RunStrategyHalted
	vm.Spec.RunStrategy = &halted
	if err := fx.client.Update(ctx, &vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VM stopped", vmStatus(fx, ns, "demo", kubevirtv1.VirtualMachineStatusStopped))
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vmi); !apierrors.IsNotFound(err) {
		t.Fatalf("VMI of a halted VM: %v", err)
	}
	eventually(t, "controller events", controllerEvents(fx, ns,
		wantEvent{"VirtualMachine", "demo", "SuccessfulCreate", "Started the virtual machine by creating the new virtual machine instance demo"},
		wantEvent{"VirtualMachine", "demo", "SuccessfulDelete", "Stopped the virtual machine by deleting the virtual machine instance"},
		wantEvent{"VirtualMachineInstance", "demo", "SuccessfulCreate", "Created virtual machine pod virt-launcher-demo-"}))

	always := kubevirtv1.RunStrategyAlways
	eventually(t, "restart", func(ctx context.Context) error {
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vm); err != nil {
			return err
		}
		vm.Spec.RunStrategy = &always
		return fx.client.Update(ctx, &vm)
	})
	eventually(t, "VMI recreated", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vmi)
	})

	if err := fx.client.Delete(ctx, &vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VM and VMI gone", func(ctx context.Context) error {
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vmi); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VMI still there: %v", err)
		}
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, &vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there (finalizers %v): %v", vm.Finalizers, err)
		}
		return nil
	})
}

// A crashed VMI of an Always VM is replaced after KubeVirt's back-off.
func TestVMCrashLoopBackOff(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	if err := fx.client.Create(ctx, newVM(ns, "crashy", kubevirtv1.RunStrategyAlways)); err != nil {
		t.Fatal(err)
	}
	var first kubevirtv1.VirtualMachineInstance
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crashy"}, &first)
	})
	setVMIPhase(t, fx, ns, "crashy", kubevirtv1.Failed, false)
	eventually(t, "crash loop back-off", vmStatus(fx, ns, "crashy", kubevirtv1.VirtualMachineStatusCrashLoopBackOff))
	var vm kubevirtv1.VirtualMachine
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crashy"}, &vm); err != nil {
		t.Fatal(err)
	}
	if f := vm.Status.StartFailure; f == nil || f.ConsecutiveFailCount != 1 || f.LastFailedVMIUID != first.UID {
		t.Fatalf("startFailure %+v", f)
	}
	eventually(t, "a new VMI after the back-off", func(ctx context.Context) error {
		var vmi kubevirtv1.VirtualMachineInstance
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crashy"}, &vmi); err != nil {
			return err
		}
		if vmi.UID == first.UID {
			return fmt.Errorf("still the crashed VMI")
		}
		return nil
	})
}

// start, stop and restart as virt-api will request them: through status.stateChangeRequests.
func TestVMStateChangeRequests(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	if err := fx.client.Create(ctx, newVM(ns, "manual", kubevirtv1.RunStrategyManual)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "manual VM stays stopped", vmStatus(fx, ns, "manual", kubevirtv1.VirtualMachineStatusStopped))

	request := func(reqs ...kubevirtv1.VirtualMachineStateChangeRequest) {
		eventually(t, "add state change request", func(ctx context.Context) error {
			var vm kubevirtv1.VirtualMachine
			if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "manual"}, &vm); err != nil {
				return err
			}
			vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, reqs...)
			return fx.client.Status().Update(ctx, &vm)
		})
	}
	request(kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	var vmi kubevirtv1.VirtualMachineInstance
	eventually(t, "started", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "manual"}, &vmi)
	})
	uid := vmi.UID
	request(kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StopRequest, UID: &uid},
		kubevirtv1.VirtualMachineStateChangeRequest{Action: kubevirtv1.StartRequest})
	eventually(t, "restarted", func(ctx context.Context) error {
		var now kubevirtv1.VirtualMachineInstance
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "manual"}, &now); err != nil {
			return err
		}
		if now.UID == uid {
			return fmt.Errorf("old VMI still there")
		}
		var vm kubevirtv1.VirtualMachine
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "manual"}, &vm); err != nil {
			return err
		}
		if len(vm.Status.StateChangeRequests) != 0 {
			return fmt.Errorf("requests left: %+v", vm.Status.StateChangeRequests)
		}
		return nil
	})
}
