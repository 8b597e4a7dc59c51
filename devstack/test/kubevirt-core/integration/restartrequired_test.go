package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtcontroller/vm"
)

// restartRequired checks the VM's RestartRequired condition: present with KubeVirt's message, or
// absent.
func restartRequired(fx *fixture, ns, name string, want bool) func(context.Context) error {
	return func(ctx context.Context) error {
		var o kubevirtv1.VirtualMachine
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &o); err != nil {
			return err
		}
		for _, c := range o.Status.Conditions {
			if c.Type != kubevirtv1.VirtualMachineRestartRequired {
				continue
			}
			if !want {
				return fmt.Errorf("condition %+v present", c)
			}
			if c.Status != corev1.ConditionTrue || c.Message != "a non-live-updatable field was changed in the template spec" {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		}
		if want {
			return fmt.Errorf("no RestartRequired condition in %+v", o.Status.Conditions)
		}
		return nil
	}
}

// updateVM reads the VM afresh and writes mut's change to its spec (status with status true),
// retrying on conflicts with the controller's own writes.
func updateVM(t *testing.T, fx *fixture, ns, name string, status bool, mut func(*kubevirtv1.VirtualMachine)) {
	t.Helper()
	eventually(t, "update VM", func(ctx context.Context) error {
		var o kubevirtv1.VirtualMachine
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &o); err != nil {
			return err
		}
		mut(&o)
		if status {
			return fx.client.Status().Update(ctx, &o)
		}
		return fx.client.Update(ctx, &o)
	})
}

func TestRestartRequired(t *testing.T) {
	fx := setup(t)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	if err := fx.client.Create(ctx, newVM(ns, "rr", kubevirtv1.RunStrategyAlways)); err != nil {
		t.Fatal(err)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rr"}, &vmi)
	})
	if vmi.Annotations[vm.TemplateHashAnnotation] == "" {
		t.Fatalf("VMI annotations %v: no template hash", vmi.Annotations)
	}
	setVMIPhase(t, fx, ns, "rr", kubevirtv1.Running, true)
	eventually(t, "VM running", vmStatus(fx, ns, "rr", kubevirtv1.VirtualMachineStatusRunning))
	eventually(t, "no RestartRequired at start", restartRequired(fx, ns, "rr", false))

	t.Log("volume hotplug is a live update: the controller applies a queued request to template and VMI")
	updateVM(t, fx, ns, "rr", true, func(o *kubevirtv1.VirtualMachine) {
		o.Status.VolumeRequests = []kubevirtv1.VirtualMachineVolumeRequest{{AddVolumeOptions: &kubevirtv1.AddVolumeOptions{
			Name: "hot", Disk: &kubevirtv1.Disk{DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusSCSI}}},
			VolumeSource: &kubevirtv1.HotplugVolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "hot-claim"}}},
		}}}
	})
	eventually(t, "hot in the template", hasVolume(fx, ns, "rr", "hot", false, true))
	eventually(t, "hot in the VMI", hasVolume(fx, ns, "rr", "hot", true, true))
	// The status write that dropped the request computed the conditions from the new template.
	eventually(t, "no RestartRequired after hotplug", restartRequired(fx, ns, "rr", false))

	t.Log("a memory change needs a restart")
	updateVM(t, fx, ns, "rr", false, func(o *kubevirtv1.VirtualMachine) {
		o.Spec.Template.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resourceQuantity("256Mi")
	})
	eventually(t, "RestartRequired after a memory change", restartRequired(fx, ns, "rr", true))

	t.Log("stop and start: the new VMI runs the current template")
	updateVM(t, fx, ns, "rr", false, func(o *kubevirtv1.VirtualMachine) {
		halted := kubevirtv1.RunStrategyHalted
		o.Spec.RunStrategy = &halted
	})
	eventually(t, "VM stopped", vmStatus(fx, ns, "rr", kubevirtv1.VirtualMachineStatusStopped))
	eventually(t, "no RestartRequired without a VMI", restartRequired(fx, ns, "rr", false))
	updateVM(t, fx, ns, "rr", false, func(o *kubevirtv1.VirtualMachine) {
		always := kubevirtv1.RunStrategyAlways
		o.Spec.RunStrategy = &always
	})
	eventually(t, "VMI recreated", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rr"}, &vmi)
	})
	if got := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; got.String() != "256Mi" {
		t.Errorf("new VMI memory %s, want 256Mi", got.String())
	}
	setVMIPhase(t, fx, ns, "rr", kubevirtv1.Running, true)
	eventually(t, "VM running again", vmStatus(fx, ns, "rr", kubevirtv1.VirtualMachineStatusRunning))
	eventually(t, "no RestartRequired after the restart", restartRequired(fx, ns, "rr", false))
}
