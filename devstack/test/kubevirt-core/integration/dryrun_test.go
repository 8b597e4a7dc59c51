package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
)

// snapshot is what a command could change: the VM's spec and status, its VMI (UID, spec and
// conditions) and the namespace's migrations.
type snapshot struct {
	vm         kubevirtv1.VirtualMachineSpec
	requests   []kubevirtv1.VirtualMachineStateChangeRequest
	volumeReqs []kubevirtv1.VirtualMachineVolumeRequest
	vmiUID     string
	vmiSpec    kubevirtv1.VirtualMachineInstanceSpec
	migrations int
}

func take(ctx context.Context, t *testing.T, fx *fixture, ns, name string) snapshot {
	t.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
		t.Fatal(err)
	}
	s := snapshot{vm: vm.Spec, requests: vm.Status.StateChangeRequests, volumeReqs: vm.Status.VolumeRequests}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	} else if err == nil {
		s.vmiUID, s.vmiSpec = string(vmi.UID), vmi.Spec
	}
	var ms kubevirtv1.VirtualMachineInstanceMigrationList
	if err := fx.client.List(ctx, &ms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	s.migrations = len(ms.Items)
	return s
}

func (s snapshot) diff(o snapshot) string {
	switch {
	case !equality.Semantic.DeepEqual(s.vm, o.vm):
		return fmt.Sprintf("VM spec %+v became %+v", s.vm, o.vm)
	case !equality.Semantic.DeepEqual(s.requests, o.requests):
		return fmt.Sprintf("state change requests %+v became %+v", s.requests, o.requests)
	case !equality.Semantic.DeepEqual(s.volumeReqs, o.volumeReqs):
		return fmt.Sprintf("volume requests %+v became %+v", s.volumeReqs, o.volumeReqs)
	case s.vmiUID != o.vmiUID:
		return fmt.Sprintf("VMI %q became %q", s.vmiUID, o.vmiUID)
	case !equality.Semantic.DeepEqual(s.vmiSpec, o.vmiSpec):
		return "VMI spec changed"
	case s.migrations != o.migrations:
		return fmt.Sprintf("%d migrations became %d", s.migrations, o.migrations)
	}
	return ""
}

// setPaused marks the VMI paused, as virt-handler would.
func setPaused(t *testing.T, fx *fixture, ns, name string) {
	t.Helper()
	eventually(t, "VMI paused", func(ctx context.Context) error {
		var vmi kubevirtv1.VirtualMachineInstance
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
			return err
		}
		vmi.Status.Phase = kubevirtv1.Running
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
		return fx.client.Update(ctx, &vmi)
	})
}

// Every subresource that changes something checks a dryRun request as a real one and changes
// nothing: KubeVirt's option bodies with dryRun ["All"] and the dryRun=All query alike. This
// virt-api has no link to any virt-handler, so a node command that were sent would answer 503.
func TestDryRunChangesNothing(t *testing.T) {
	fx := setup(t)
	startVirtAPI(t, fx)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	const body = `{"dryRun":["All"]}`
	dry := map[string]string{"dryRun": "All"}
	vmPath := func(name, sub string) string { return "v1/namespaces/" + ns + "/virtualmachines/" + name + "/" + sub }
	vmiPath := func(name, sub string) string {
		return "v1/namespaces/" + ns + "/virtualmachineinstances/" + name + "/" + sub
	}
	type dryCall struct {
		name, path, body string
		query            map[string]string
		code             int
	}
	check := func(vm string, calls []dryCall) {
		t.Helper()
		for _, c := range calls {
			before := take(ctx, t, fx, ns, vm)
			code, raw, st := call(t, fx.sidecar, http.MethodPut, c.path, c.query, c.body)
			if code != c.code || st != nil {
				t.Errorf("%s: %d %s (%+v), want %d", c.name, code, raw, st, c.code)
				continue
			}
			// Give the controllers a moment to act on anything that was stored.
			time.Sleep(500 * time.Millisecond)
			if d := before.diff(take(ctx, t, fx, ns, vm)); d != "" {
				t.Errorf("%s changed something: %s", c.name, d)
			}
		}
	}

	if err := fx.client.Create(ctx, newVM(ns, "halted", kubevirtv1.RunStrategyHalted)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "stopped", vmStatus(fx, ns, "halted", kubevirtv1.VirtualMachineStatusStopped))
	check("halted", []dryCall{
		{"start", vmPath("halted", "start"), body, nil, http.StatusAccepted},
		{"start paused", vmPath("halted", "start"), `{"paused":true,"dryRun":["All"]}`, nil, http.StatusAccepted},
		{"start by query", vmPath("halted", "start"), "", dry, http.StatusAccepted},
		{"addvolume by query", vmPath("halted", "addvolume"), `{"name":"hot","disk":{"disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"c"}}}`, dry, http.StatusAccepted},
	})
	// A dry run is checked all the same.
	if code, _, st := call(t, fx.sidecar, http.MethodPut, vmPath("halted", "stop"), nil, body); code != http.StatusConflict || !strings.Contains(st.Message, "VM is not running") {
		t.Errorf("dry stop of a stopped VM: %d %+v", code, st)
	}
	if code, _, st := call(t, fx.sidecar, http.MethodPut, vmPath("halted", "start"), nil, `{"dryRun":["Some"]}`); code != http.StatusBadRequest ||
		st.Message != `dryRun: Unsupported value: "Some": supported values: "All"` {
		t.Errorf("start with a bad dryRun: %d %+v", code, st)
	}

	if err := fx.client.Create(ctx, newVM(ns, "on", kubevirtv1.RunStrategyAlways)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "on"}, &kubevirtv1.VirtualMachineInstance{})
	})
	setVMIPhase(t, fx, ns, "on", kubevirtv1.Running, true)
	eventually(t, "running", vmStatus(fx, ns, "on", kubevirtv1.VirtualMachineStatusRunning))
	check("on", []dryCall{
		{"stop", vmPath("on", "stop"), body, nil, http.StatusAccepted},
		{"restart", vmPath("on", "restart"), body, nil, http.StatusAccepted},
		{"forced restart", vmPath("on", "restart"), `{"gracePeriodSeconds":0,"dryRun":["All"]}`, nil, http.StatusAccepted},
		{"migrate", vmPath("on", "migrate"), body, nil, http.StatusAccepted},
		{"pause", vmiPath("on", "pause"), body, nil, http.StatusOK},
		{"pause by query", vmiPath("on", "pause"), "", dry, http.StatusOK},
		{"soft reboot", vmiPath("on", "softreboot"), "", dry, http.StatusOK},
		{"reset", vmiPath("on", "reset"), "", dry, http.StatusOK},
		{"freeze", vmiPath("on", "freeze"), "", dry, http.StatusOK},
		{"unfreeze", vmiPath("on", "unfreeze"), "", dry, http.StatusOK},
		{"VMI addvolume", vmiPath("on", "addvolume"), `{"name":"hot","disk":{"disk":{"bus":"virtio"}},"volumeSource":{"persistentVolumeClaim":{"claimName":"c"}},"dryRun":["All"]}`, nil, http.StatusAccepted},
	})
	// Without dryRun the same pause reaches for the node, which this virt-api cannot reach.
	if code, _, _ := call(t, fx.sidecar, http.MethodPut, vmiPath("on", "pause"), nil, ""); code != http.StatusServiceUnavailable {
		t.Errorf("a real pause answered %d, want 503 (no virt-handler link)", code)
	}
	setPaused(t, fx, ns, "on")
	check("on", []dryCall{
		{"unpause", vmiPath("on", "unpause"), body, nil, http.StatusOK},
	})
	if code, _, st := call(t, fx.sidecar, http.MethodPut, vmiPath("on", "pause"), nil, body); code != http.StatusConflict || !strings.Contains(st.Message, "VMI is already paused") {
		t.Errorf("dry pause of a paused VMI: %d %+v", code, st)
	}
}
