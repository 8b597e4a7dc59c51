package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// hasVolume waits until the VM template (vmi false) or the VMI has the volume or, with want
// false, has not; a VM must also have no pending volume requests left.
func hasVolume(fx *fixture, ns, name, volume string, vmi, want bool) func(context.Context) error {
	return func(ctx context.Context) error {
		var vols []kubevirtv1.Volume
		if vmi {
			var o kubevirtv1.VirtualMachineInstance
			if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &o); err != nil {
				return err
			}
			vols = o.Spec.Volumes
		} else {
			var o kubevirtv1.VirtualMachine
			if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &o); err != nil {
				return err
			}
			if n := len(o.Status.VolumeRequests); n > 0 {
				return fmt.Errorf("%d volume requests pending", n)
			}
			vols = o.Spec.Template.Spec.Volumes
		}
		for _, v := range vols {
			if v.Name == volume {
				if !want {
					return fmt.Errorf("volume %s still there", volume)
				}
				if v.PersistentVolumeClaim == nil || !v.PersistentVolumeClaim.Hotpluggable {
					return fmt.Errorf("volume %s not hotpluggable: %+v", volume, v)
				}
				return nil
			}
		}
		if want {
			return fmt.Errorf("no volume %s", volume)
		}
		return nil
	}
}

func TestVolumeHotplug(t *testing.T) {
	fx := setup(t)
	startVirtAPI(t, fx)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	addBody := func(name, claim string) string {
		return fmt.Sprintf(`{"name":%q,"disk":{"disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":%q}}}`, name, claim)
	}

	vm := newVM(ns, "hp", kubevirtv1.RunStrategyHalted)
	vm.Spec.Template.Spec.Domain.Devices.Disks = []kubevirtv1.Disk{{Name: "data"}}
	vm.Spec.Template.Spec.Volumes = []kubevirtv1.Volume{{Name: "data", VolumeSource: kubevirtv1.VolumeSource{
		PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}},
	}}}
	if err := fx.client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, resource, target, cmd, body string
		code                              int
		msg                               string
	}{
		{"missing VM", "virtualmachines", "missing", "addvolume", addBody("x", "x"), http.StatusNotFound, `virtualmachine.kubevirt.io "missing" not found`},
		{"no name", "virtualmachines", "hp", "addvolume", `{}`, http.StatusBadRequest, "AddVolumeOptions requires name to be set"},
		{"no disk", "virtualmachines", "hp", "addvolume", `{"name":"x"}`, http.StatusBadRequest, "AddVolumeOptions requires disk to not be nil"},
		{"no source", "virtualmachines", "hp", "addvolume", `{"name":"x","disk":{}}`, http.StatusBadRequest, "AddVolumeOptions requires VolumeSource to not be nil"},
		{"bad body", "virtualmachines", "hp", "addvolume", `{"name":`, http.StatusBadRequest, "Can not unmarshal Request body to struct, error: unexpected EOF"},
		{"duplicate name", "virtualmachines", "hp", "addvolume", addBody("data", "other"), http.StatusConflict,
			`Operation cannot be fulfilled on virtualmachine.kubevirt.io "hp": Unable to add volume [data] because volume with that name already exists`},
		{"claim in use", "virtualmachines", "hp", "addvolume", addBody("other", "data"), http.StatusConflict,
			`Operation cannot be fulfilled on virtualmachine.kubevirt.io "hp": Unable to add volume source [data] because it already exists`},
		{"remove without name", "virtualmachines", "hp", "removevolume", `{}`, http.StatusBadRequest, "RemoveVolumeOptions requires name to be set"},
		{"remove a plain volume", "virtualmachines", "hp", "removevolume", `{"name":"data"}`, http.StatusConflict,
			`Operation cannot be fulfilled on virtualmachine.kubevirt.io "hp": Unable to remove volume [data] because it is not hotpluggable`},
		{"remove what is not there", "virtualmachines", "hp", "removevolume", `{"name":"nope"}`, http.StatusConflict,
			`Operation cannot be fulfilled on virtualmachine.kubevirt.io "hp": Unable to remove volume [nope] because it does not exist`},
		{"missing VMI", "virtualmachineinstances", "missing", "addvolume", addBody("x", "x"), http.StatusNotFound, `virtualmachineinstance.kubevirt.io "missing" not found`},
		{"VMI not running", "virtualmachineinstances", "hp", "addvolume", addBody("x", "x"), http.StatusNotFound, `virtualmachineinstance.kubevirt.io "hp" not found`},
	} {
		if code, msg := command(t, fx.sidecar, ns, tc.resource, tc.target, tc.cmd, tc.body); code != tc.code || msg != tc.msg {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}

	t.Log("dry runs are checked and change nothing")
	dry := `{"name":"hot","disk":{"disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"hot-claim"}},"dryRun":["All"]}`
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "hp", "addvolume", dry); code != http.StatusAccepted {
		t.Fatalf("dry-run addvolume: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "hp", "removevolume", `{"name":"data","dryRun":["All"]}`); code != http.StatusConflict {
		t.Errorf("dry-run removevolume of a plain volume: %d %q, want 409", code, msg)
	}
	// Nothing to wait for: give a stored request the time the controller needs to apply it.
	time.Sleep(2 * time.Second)
	if err := hasVolume(fx, ns, "hp", "hot", false, false)(ctx); err != nil {
		t.Fatalf("after a dry run: %v", err)
	}

	t.Log("a stopped VM: the request lands in the template")
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "hp", "addvolume", addBody("hot", "hot-claim")); code != http.StatusAccepted {
		t.Fatalf("addvolume: %d %q", code, msg)
	}
	eventually(t, "hot in the template", hasVolume(fx, ns, "hp", "hot", false, true))
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "hp", "removevolume", `{"name":"hot"}`); code != http.StatusAccepted {
		t.Fatalf("removevolume: %d %q", code, msg)
	}
	eventually(t, "hot gone from the template", hasVolume(fx, ns, "hp", "hot", false, false))

	t.Log("a running VM: the request reaches the VMI too")
	var cur kubevirtv1.VirtualMachine
	if err := fx.client.Get(ctx, client.ObjectKeyFromObject(vm), &cur); err != nil {
		t.Fatal(err)
	}
	always := kubevirtv1.RunStrategyAlways
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.RunStrategy = &always
	if err := fx.client.Patch(ctx, &cur, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hp"}, &kubevirtv1.VirtualMachineInstance{})
	})
	if code, msg := command(t, fx.sidecar, ns, "virtualmachineinstances", "hp", "addvolume", addBody("x", "x")); code != http.StatusConflict ||
		msg != `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "hp": VMI is not running` {
		t.Errorf("addvolume on a VMI that does not run: %d %q", code, msg)
	}
	setVMIPhase(t, fx, ns, "hp", kubevirtv1.Running, true)
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "hp", "addvolume", addBody("hot", "hot-claim")); code != http.StatusAccepted {
		t.Fatalf("addvolume: %d %q", code, msg)
	}
	eventually(t, "hot in the template", hasVolume(fx, ns, "hp", "hot", false, true))
	eventually(t, "hot in the VMI", hasVolume(fx, ns, "hp", "hot", true, true))

	t.Log("the VMI's own subresources change only the VMI")
	if code, msg := command(t, fx.sidecar, ns, "virtualmachineinstances", "hp", "removevolume", `{"name":"data"}`); code != http.StatusConflict ||
		msg != `Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "hp": Unable to remove volume [data] because it is not hotpluggable` {
		t.Errorf("removevolume of a plain volume on the VMI: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachineinstances", "hp", "addvolume", addBody("eph", "eph-claim")); code != http.StatusAccepted {
		t.Fatalf("VMI addvolume: %d %q", code, msg)
	}
	eventually(t, "eph in the VMI", hasVolume(fx, ns, "hp", "eph", true, true))
	if code, msg := command(t, fx.sidecar, ns, "virtualmachineinstances", "hp", "removevolume", `{"name":"hot"}`); code != http.StatusAccepted {
		t.Fatalf("VMI removevolume: %d %q", code, msg)
	}
	eventually(t, "hot gone from the VMI", hasVolume(fx, ns, "hp", "hot", true, false))
	eventually(t, "hot still in the template", hasVolume(fx, ns, "hp", "hot", false, true))
	eventually(t, "eph never in the template", hasVolume(fx, ns, "hp", "eph", false, false))
}
