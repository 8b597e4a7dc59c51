package api

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/testenv"
)

func blockDeviceAttachment(ns, name string) *v1alpha2.VirtualMachineBlockDeviceAttachment {
	return &v1alpha2.VirtualMachineBlockDeviceAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha2.VirtualMachineBlockDeviceAttachmentSpec{VirtualMachineName: "vm",
			BlockDeviceRef: v1alpha2.VMBDAObjectRef{Kind: v1alpha2.VMBDAObjectRefKindVirtualDisk, Name: "data"}},
	}
}

// A VirtualMachineBlockDeviceAttachment is created through the typed client, refuses bad kinds
// and changes of its spec with messages that name the field, and kubectl shows its columns.
func TestBlockDeviceAttachment(t *testing.T) {
	env, client := setup(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	api := client.VirtualizationV1alpha2().VirtualMachineBlockDeviceAttachments(ns)
	a, err := api.Create(ctx, blockDeviceAttachment(ns, "hotplug"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.Status = v1alpha2.VirtualMachineBlockDeviceAttachmentStatus{Phase: v1alpha2.BlockDeviceAttachmentPhaseAttached, VirtualMachineName: "vm"}
	if a, err = api.UpdateStatus(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change func(*v1alpha2.VirtualMachineBlockDeviceAttachment)
		create bool
		want   denial
	}{
		{"an unknown kind", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.Spec.BlockDeviceRef.Kind = "Pod" }, true,
			denial{"spec.blockDeviceRef.kind", "Unsupported value"}},
		{"no machine", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.Spec.VirtualMachineName = "" }, true,
			denial{"spec.virtualMachineName", "should be at least 1 chars long"}},
		{"another machine", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.Spec.VirtualMachineName = "other" }, false,
			denial{"spec.virtualMachineName", "spec.virtualMachineName is immutable"}},
		{"another disk", func(a *v1alpha2.VirtualMachineBlockDeviceAttachment) { a.Spec.BlockDeviceRef.Name = "other" }, false,
			denial{"spec.blockDeviceRef", "spec.blockDeviceRef is immutable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.create {
				bad := blockDeviceAttachment(ns, "bad")
				tc.change(bad)
				_, err := api.Create(ctx, bad, metav1.CreateOptions{})
				assertDenied(t, err, tc.want)
				return
			}
			changed := a.DeepCopy()
			tc.change(changed)
			_, err := api.Update(ctx, changed, metav1.UpdateOptions{})
			assertDenied(t, err, tc.want)
		})
	}
	out := testenv.Kubectl(t, env.Kubeconfig, "get", "vmbda", "-n", ns)
	for _, w := range []string{"PHASE", "VIRTUAL MACHINE NAME", "AGE", "hotplug", "Attached", "vm"} {
		if !strings.Contains(out, w) {
			t.Errorf("kubectl get vmbda lacks %q:\n%s", w, out)
		}
	}
	if out := testenv.Kubectl(t, env.Kubeconfig, "explain", "vmbda.spec.blockDeviceRef.kind"); !strings.Contains(squash(out), squash("attached read-write")) {
		t.Errorf("kubectl explain:\n%s", out)
	}
}
