package vm

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func vmWith(mut ...func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid", Generation: 3}}
	for _, m := range mut {
		m(vm)
	}
	return vm
}

func vmiIn(phase kubevirtv1.VirtualMachineInstancePhase, mut ...func(*kubevirtv1.VirtualMachineInstance)) *kubevirtv1.VirtualMachineInstance {
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", UID: "vmi-uid"}}
	vmi.Status.Phase = phase
	for _, m := range mut {
		m(vmi)
	}
	return vmi
}

var (
	beingDeleted = func(vm *kubevirtv1.VirtualMachine) { t := metav1.NewTime(now); vm.DeletionTimestamp = &t }
	vmiDeleting  = func(vmi *kubevirtv1.VirtualMachineInstance) { t := metav1.NewTime(now); vmi.DeletionTimestamp = &t }
)

// pausedStart is a start request that asks for a paused guest, as virt-api's start with paused.
func pausedStart(vm *kubevirtv1.VirtualMachine) {
	vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, kubevirtv1.VirtualMachineStateChangeRequest{
		Action: kubevirtv1.StartRequest, Data: map[string]string{kubevirtv1.StartRequestDataPausedKey: kubevirtv1.StartRequestDataPausedTrue},
	})
}

func request(a kubevirtv1.StateChangeRequestAction, uid string) func(*kubevirtv1.VirtualMachine) {
	return func(vm *kubevirtv1.VirtualMachine) {
		r := kubevirtv1.VirtualMachineStateChangeRequest{Action: a}
		if uid != "" {
			u := types.UID(uid)
			r.UID = &u
		}
		vm.Status.StateChangeRequests = append(vm.Status.StateChangeRequests, r)
	}
}

func backingOff(vm *kubevirtv1.VirtualMachine) {
	t := metav1.NewTime(now.Add(time.Minute))
	vm.Status.StartFailure = &kubevirtv1.VirtualMachineStartFailure{ConsecutiveFailCount: 2, RetryAfterTimestamp: &t}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		strategy kubevirtv1.VirtualMachineRunStrategy
		vm       *kubevirtv1.VirtualMachine
		vmi      *kubevirtv1.VirtualMachineInstance
		want     Decision
	}{
		{"always starts", kubevirtv1.RunStrategyAlways, vmWith(), nil, Decision{Action: Create}},
		{"always keeps a running VMI", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Running), Decision{}},
		{"always restarts after a clean stop", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Succeeded), Decision{Action: Delete}},
		{"always restarts after a crash", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Failed), Decision{Action: Delete}},
		{"always backs off", kubevirtv1.RunStrategyAlways, vmWith(backingOff), nil, Decision{Action: Create, NotBefore: now.Add(time.Minute).Truncate(time.Second)}},
		{"waits for a VMI being deleted", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Running, vmiDeleting), Decision{}},
		{"rerun restarts after a crash", kubevirtv1.RunStrategyRerunOnFailure, vmWith(), vmiIn(kubevirtv1.Failed), Decision{Action: Delete}},
		{"rerun keeps a clean stop", kubevirtv1.RunStrategyRerunOnFailure, vmWith(), vmiIn(kubevirtv1.Succeeded), Decision{}},
		{"rerun starts", kubevirtv1.RunStrategyRerunOnFailure, vmWith(), nil, Decision{Action: Create}},
		{"once starts", kubevirtv1.RunStrategyOnce, vmWith(), nil, Decision{Action: Create}},
		{"once halts when done", kubevirtv1.RunStrategyOnce, vmWith(), vmiIn(kubevirtv1.Failed), Decision{Action: Halt}},
		{"halted stops", kubevirtv1.RunStrategyHalted, vmWith(), vmiIn(kubevirtv1.Running), Decision{Action: Delete}},
		{"halted clears a finished VMI", kubevirtv1.RunStrategyHalted, vmWith(), vmiIn(kubevirtv1.Succeeded), Decision{Action: Delete}},
		{"halted without VMI", kubevirtv1.RunStrategyHalted, vmWith(), nil, Decision{}},
		{"manual does nothing by itself", kubevirtv1.RunStrategyManual, vmWith(), nil, Decision{}},
		{"manual start request", kubevirtv1.RunStrategyManual, vmWith(request(kubevirtv1.StartRequest, "")), nil, Decision{Action: Create, ConsumeRequests: 1}},
		{"start request on a running VMI is done", kubevirtv1.RunStrategyManual, vmWith(request(kubevirtv1.StartRequest, "")), vmiIn(kubevirtv1.Running), Decision{ConsumeRequests: 1}},
		{"start request replaces a finished VMI", kubevirtv1.RunStrategyManual, vmWith(request(kubevirtv1.StartRequest, "")), vmiIn(kubevirtv1.Succeeded), Decision{Action: Delete}},
		{"stop request", kubevirtv1.RunStrategyManual, vmWith(request(kubevirtv1.StopRequest, "vmi-uid")), vmiIn(kubevirtv1.Running), Decision{Action: Delete}},
		{"stop request for another VMI is done", kubevirtv1.RunStrategyAlways, vmWith(request(kubevirtv1.StopRequest, "old")), vmiIn(kubevirtv1.Running), Decision{ConsumeRequests: 1}},
		{"stop request after the VMI went", kubevirtv1.RunStrategyManual, vmWith(request(kubevirtv1.StopRequest, "vmi-uid")), nil, Decision{ConsumeRequests: 1}},
		{"restart: stop then start", kubevirtv1.RunStrategyAlways, vmWith(request(kubevirtv1.StopRequest, "vmi-uid"), request(kubevirtv1.StartRequest, "")), vmiIn(kubevirtv1.Running), Decision{Action: Delete}},
		{"paused start of a halted VM switches it on first", kubevirtv1.RunStrategyHalted, vmWith(pausedStart), nil, Decision{Action: Run}},
		{"paused start once switched on", kubevirtv1.RunStrategyAlways, vmWith(pausedStart), nil, Decision{Action: Create, ConsumeRequests: 1, StartPaused: true}},
		{"paused start of a manual VM", kubevirtv1.RunStrategyManual, vmWith(pausedStart), nil, Decision{Action: Create, ConsumeRequests: 1, StartPaused: true}},
		{"halted VM with a start request and a VMI still stops it", kubevirtv1.RunStrategyHalted, vmWith(pausedStart), vmiIn(kubevirtv1.Succeeded), Decision{Action: Delete}},
		{"deleted VM stops its VMI", kubevirtv1.RunStrategyAlways, vmWith(beingDeleted), vmiIn(kubevirtv1.Running), Decision{Action: Delete}},
		{"deleted VM never starts", kubevirtv1.RunStrategyAlways, vmWith(beingDeleted), nil, Decision{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.vm, tc.vmi, tc.strategy, now)
			if !got.NotBefore.Equal(tc.want.NotBefore) || got.Action != tc.want.Action || got.ConsumeRequests != tc.want.ConsumeRequests || got.StartPaused != tc.want.StartPaused {
				t.Errorf("Decide = %+v (%s), want %+v (%s)", got, got.Action, tc.want, tc.want.Action)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 6: 5 * time.Minute, 50: 5 * time.Minute} {
		if got := Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func readyVMI(phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceConditionType) *kubevirtv1.VirtualMachineInstance {
	return vmiIn(phase, func(vmi *kubevirtv1.VirtualMachineInstance) {
		for _, c := range conds {
			vmi.Status.Conditions = append(vmi.Status.Conditions, kubevirtv1.VirtualMachineInstanceCondition{Type: c, Status: corev1.ConditionTrue})
		}
	})
}

func TestPrintableStatus(t *testing.T) {
	tests := []struct {
		name     string
		strategy kubevirtv1.VirtualMachineRunStrategy
		vm       *kubevirtv1.VirtualMachine
		vmi      *kubevirtv1.VirtualMachineInstance
		want     kubevirtv1.VirtualMachinePrintableStatus
	}{
		{"stopped", kubevirtv1.RunStrategyHalted, vmWith(), nil, kubevirtv1.VirtualMachineStatusStopped},
		{"starting before the VMI exists", kubevirtv1.RunStrategyAlways, vmWith(), nil, kubevirtv1.VirtualMachineStatusStarting},
		{"starting while scheduling", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Scheduling), kubevirtv1.VirtualMachineStatusStarting},
		{"running", kubevirtv1.RunStrategyAlways, vmWith(), readyVMI(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReady), kubevirtv1.VirtualMachineStatusRunning},
		{"paused beats running", kubevirtv1.RunStrategyAlways, vmWith(), readyVMI(kubevirtv1.Running, kubevirtv1.VirtualMachineInstancePaused), kubevirtv1.VirtualMachineStatusPaused},
		{"stopping on halt", kubevirtv1.RunStrategyHalted, vmWith(), vmiIn(kubevirtv1.Running), kubevirtv1.VirtualMachineStatusStopping},
		{"stopping while the VMI goes", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Running, vmiDeleting), kubevirtv1.VirtualMachineStatusStopping},
		{"terminating beats all", kubevirtv1.RunStrategyAlways, vmWith(beingDeleted), readyVMI(kubevirtv1.Running), kubevirtv1.VirtualMachineStatusTerminating},
		{"crash loop", kubevirtv1.RunStrategyAlways, vmWith(backingOff), nil, kubevirtv1.VirtualMachineStatusCrashLoopBackOff},
		{"unschedulable", kubevirtv1.RunStrategyAlways, vmWith(), vmiIn(kubevirtv1.Scheduling, func(vmi *kubevirtv1.VirtualMachineInstance) {
			vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: "PodScheduled", Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}), kubevirtv1.VirtualMachineStatusUnschedulable},
		{"migrating while the job runs", kubevirtv1.RunStrategyAlways, vmWith(), readyVMI(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReady), kubevirtv1.VirtualMachineStatusMigrating},
		{"running while the target prepares", kubevirtv1.RunStrategyAlways, vmWith(), readyVMI(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReady), kubevirtv1.VirtualMachineStatusRunning},
		{"running after a failed migration", kubevirtv1.RunStrategyAlways, vmWith(), readyVMI(kubevirtv1.Running, kubevirtv1.VirtualMachineInstanceReady), kubevirtv1.VirtualMachineStatusRunning},
	}
	migrationStates := map[string]*kubevirtv1.VirtualMachineInstanceMigrationState{
		"migrating while the job runs":      {StartTimestamp: &metav1.Time{Time: now.Add(-time.Second)}},
		"running while the target prepares": {TargetNode: "n2"},
		"running after a failed migration":  {StartTimestamp: &metav1.Time{Time: now.Add(-time.Minute)}, EndTimestamp: &metav1.Time{Time: now.Add(-time.Second)}, Failed: true},
	}
	for i := range tests {
		if ms, ok := migrationStates[tests[i].name]; ok {
			tests[i].vmi.Status.MigrationState = ms
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.vm, tc.vmi, tc.strategy, now)
			if d.NotBefore.After(now) {
				d = Decision{}
			}
			st := Status(tc.vm, tc.vmi, tc.strategy, d, now)
			if st.PrintableStatus != tc.want {
				t.Errorf("printableStatus %s, want %s", st.PrintableStatus, tc.want)
			}
		})
	}
}

func TestStatusCountsCrashesOnce(t *testing.T) {
	vm := vmWith()
	crashed := vmiIn(kubevirtv1.Failed)
	st := Status(vm, crashed, kubevirtv1.RunStrategyAlways, Decision{Action: Delete}, now)
	if st.StartFailure == nil || st.StartFailure.ConsecutiveFailCount != 1 || st.StartFailure.LastFailedVMIUID != "vmi-uid" {
		t.Fatalf("first crash: %+v", st.StartFailure)
	}
	vm.Status = st
	again := Status(vm, crashed, kubevirtv1.RunStrategyAlways, Decision{Action: Delete}, now.Add(time.Second))
	if again.StartFailure.ConsecutiveFailCount != 1 {
		t.Fatalf("the same crash counted twice: %+v", again.StartFailure)
	}
	vm.Status = again
	second := vmiIn(kubevirtv1.Failed, func(vmi *kubevirtv1.VirtualMachineInstance) { vmi.UID = "vmi-2" })
	st2 := Status(vm, second, kubevirtv1.RunStrategyAlways, Decision{Action: Delete}, now)
	if st2.StartFailure.ConsecutiveFailCount != 2 || !st2.StartFailure.RetryAfterTimestamp.Time.Equal(now.Add(20*time.Second)) {
		t.Fatalf("second crash: %+v", st2.StartFailure)
	}
	vm.Status = st2
	if ok := Status(vm, readyVMI(kubevirtv1.Running), kubevirtv1.RunStrategyAlways, Decision{}, now); ok.StartFailure != nil {
		t.Fatalf("running did not reset the streak: %+v", ok.StartFailure)
	}
}

func TestNewVMI(t *testing.T) {
	vm := vmWith(func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io/domain": "vm"}, GenerateName: "x-"},
		}
	})
	vmi := NewVMI(vm)
	if vmi.Name != "vm" || vmi.Namespace != "ns" || vmi.GenerateName != "" {
		t.Errorf("identity %s/%s %q", vmi.Namespace, vmi.Name, vmi.GenerateName)
	}
	if !metav1.IsControlledBy(vmi, vm) || vmi.OwnerReferences[0].APIVersion != "kubevirt.io/v1" {
		t.Errorf("owner %+v", vmi.OwnerReferences)
	}
	if vmi.Labels["kubevirt.io/domain"] != "vm" || vmi.Labels[CreatedByLabel] != "vm-uid" || vmi.Annotations[GenerationAnnotation] != "3" {
		t.Errorf("labels %v annotations %v", vmi.Labels, vmi.Annotations)
	}
	if vmi.Annotations[TemplateHashAnnotation] != TemplateHash(vm.Spec.Template) {
		t.Errorf("template hash %q", vmi.Annotations[TemplateHashAnnotation])
	}
	if len(vmi.Finalizers) != 1 || vmi.Finalizers[0] != kubevirtv1.VirtualMachineControllerFinalizer {
		t.Errorf("finalizers %v", vmi.Finalizers)
	}
	// Created as the VMI controller would first write it, so that it does not have to.
	if want := (kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Pending}); !equality.Semantic.DeepEqual(vmi.Status, want) {
		t.Errorf("status %+v, want %+v", vmi.Status, want)
	}
	if vm.Spec.Template.ObjectMeta.Labels[CreatedByLabel] != "" {
		t.Error("NewVMI changed the VM's template")
	}
}
