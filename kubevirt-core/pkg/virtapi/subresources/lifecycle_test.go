package subresources

import (
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func vm(strategy kubevirtv1.VirtualMachineRunStrategy, mut ...func(*kubevirtv1.VirtualMachine)) *kubevirtv1.VirtualMachine {
	v := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}
	if strategy != "" {
		v.Spec.RunStrategy = &strategy
	}
	for _, m := range mut {
		m(v)
	}
	return v
}

func runningField(on bool) func(*kubevirtv1.VirtualMachine) {
	return func(v *kubevirtv1.VirtualMachine) { v.Spec.RunStrategy = nil; v.Spec.Running = &on }
}

func pending(v *kubevirtv1.VirtualMachine) {
	v.Status.Created = true
	v.Status.StateChangeRequests = []kubevirtv1.VirtualMachineStateChangeRequest{{Action: kubevirtv1.StartRequest}}
}

func vmi(phase kubevirtv1.VirtualMachineInstancePhase) *kubevirtv1.VirtualMachineInstance {
	return &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "demo", UID: "u1"}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase}}
}

func TestPlans(t *testing.T) {
	zero, one := int64(0), int64(1)
	all := []string{metav1.DryRunAll}
	tests := []struct {
		name     string
		plan     func() (Plan, error)
		wantCode int
		wantMsg  string
		wantSpec string
		wantOps  []string
		wantDry  bool
	}{
		{name: "start halted sets runStrategy", plan: p(StartPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.StartOptions{})), wantSpec: `{"spec":{"runStrategy":"Always"}}`},
		{name: "start running=false sets running", plan: p(StartPlan(vm("", runningField(false)), nil, kubevirtv1.StartOptions{})), wantSpec: `{"spec":{"running":true}}`},
		{name: "start paused asks the controller", plan: p(StartPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.StartOptions{Paused: true})), wantOps: []string{`"op":"add","path":"/status"`, `"paused":"true"`}},
		{name: "start running VM", plan: p(StartPlan(vm(kubevirtv1.RunStrategyManual), vmi(kubevirtv1.Running), kubevirtv1.StartOptions{})), wantCode: http.StatusConflict, wantMsg: "VM is already running"},
		{name: "start always", plan: p(StartPlan(vm(kubevirtv1.RunStrategyAlways), nil, kubevirtv1.StartOptions{})), wantCode: http.StatusConflict, wantMsg: "Always does not support manual start requests"},
		{name: "start once", plan: p(StartPlan(vm(kubevirtv1.RunStrategyOnce), vmi(kubevirtv1.Succeeded), kubevirtv1.StartOptions{})), wantCode: http.StatusConflict, wantMsg: "Once does not support manual start requests"},
		{name: "start manual", plan: p(StartPlan(vm(kubevirtv1.RunStrategyManual), nil, kubevirtv1.StartOptions{})), wantOps: []string{`"action":"Start"`}},
		{name: "start manual after it ended restarts", plan: p(StartPlan(vm(kubevirtv1.RunStrategyManual), vmi(kubevirtv1.Succeeded), kubevirtv1.StartOptions{})), wantOps: []string{`"action":"Stop","uid":"u1"`, `"action":"Start"`}},
		{name: "start rerun from failure", plan: p(StartPlan(vm(kubevirtv1.RunStrategyRerunOnFailure), vmi(kubevirtv1.Failed), kubevirtv1.StartOptions{})), wantCode: http.StatusConflict, wantMsg: "RerunOnFailure does not support starting VM from failed state"},
		{name: "start while a request is pending", plan: p(StartPlan(vm(kubevirtv1.RunStrategyManual, pending), nil, kubevirtv1.StartOptions{})), wantCode: http.StatusInternalServerError, wantMsg: "stop/start already underway"},
		{name: "stop always", plan: p(StopPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.StopOptions{})), wantSpec: `{"spec":{"runStrategy":"Halted"}}`},
		{name: "stop running=true", plan: p(StopPlan(vm("", runningField(true)), vmi(kubevirtv1.Running), kubevirtv1.StopOptions{})), wantSpec: `{"spec":{"running":false}}`},
		{name: "stop halted", plan: p(StopPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.StopOptions{})), wantCode: http.StatusConflict, wantMsg: "VM is not running"},
		{name: "migrate stopped VM", plan: p(MigratePlan(vm(kubevirtv1.RunStrategyAlways), nil, kubevirtv1.MigrateOptions{})), wantCode: http.StatusConflict, wantMsg: "VM is not running"},
		{name: "migrate scheduling VMI", plan: p(MigratePlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Scheduling), kubevirtv1.MigrateOptions{})), wantCode: http.StatusConflict, wantMsg: "VM is not running"},
		{name: "stop halted without shorter grace", plan: p(StopPlan(vm(kubevirtv1.RunStrategyHalted), vmi(kubevirtv1.Running), kubevirtv1.StopOptions{})), wantCode: http.StatusConflict, wantMsg: "Halted only supports manual stop requests with a shorter graceperiod"},
		{name: "stop manual", plan: p(StopPlan(vm(kubevirtv1.RunStrategyManual), vmi(kubevirtv1.Running), kubevirtv1.StopOptions{})), wantOps: []string{`"action":"Stop","uid":"u1"`}},
		{name: "stop manual replaces pending requests", plan: p(StopPlan(vm(kubevirtv1.RunStrategyManual, pending), vmi(kubevirtv1.Running), kubevirtv1.StopOptions{})), wantOps: []string{`"op":"test"`, `"op":"replace"`}},
		{name: "stop manual not running", plan: p(StopPlan(vm(kubevirtv1.RunStrategyManual), vmi(kubevirtv1.Succeeded), kubevirtv1.StopOptions{})), wantCode: http.StatusConflict, wantMsg: "VM is not running"},
		{name: "restart", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.RestartOptions{})), wantOps: []string{`"action":"Stop","uid":"u1"`, `"action":"Start"`}},
		{name: "restart halted", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.RestartOptions{})), wantCode: http.StatusConflict, wantMsg: "RunStategy Halted does not support manual restart requests"},
		{name: "restart without VMI", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyManual), nil, kubevirtv1.RestartOptions{})), wantCode: http.StatusConflict, wantMsg: "VM is not running: Halted"},
		{name: "restart grace 1", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.RestartOptions{GracePeriodSeconds: &one})), wantCode: http.StatusBadRequest, wantMsg: "only gracePeriod=0 is supported"},
		{name: "restart force", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.RestartOptions{GracePeriodSeconds: &zero})), wantOps: []string{`"action":"Start"`}},
		{name: "start dry run", plan: p(StartPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.StartOptions{DryRun: all})), wantSpec: `{"spec":{"runStrategy":"Always"}}`, wantDry: true},
		{name: "start paused dry run", plan: p(StartPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.StartOptions{Paused: true, DryRun: all})), wantOps: []string{`"paused":"true"`}, wantDry: true},
		{name: "start dry run still checks", plan: p(StartPlan(vm(kubevirtv1.RunStrategyManual), vmi(kubevirtv1.Running), kubevirtv1.StartOptions{DryRun: all})), wantCode: http.StatusConflict, wantMsg: "VM is already running"},
		{name: "start bad dry run", plan: p(StartPlan(vm(kubevirtv1.RunStrategyHalted), nil, kubevirtv1.StartOptions{DryRun: []string{"yes"}})), wantCode: http.StatusBadRequest, wantMsg: `dryRun: Unsupported value: "yes"`},
		{name: "stop dry run", plan: p(StopPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.StopOptions{DryRun: all})), wantSpec: `{"spec":{"runStrategy":"Halted"}}`, wantDry: true},
		{name: "restart dry run", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.RestartOptions{DryRun: all})), wantOps: []string{`"action":"Start"`}, wantDry: true},
		{name: "restart force dry run", plan: p(RestartPlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.RestartOptions{GracePeriodSeconds: &zero, DryRun: all})), wantOps: []string{`"action":"Start"`}, wantDry: true},
		{name: "migrate dry run", plan: p(MigratePlan(vm(kubevirtv1.RunStrategyAlways), vmi(kubevirtv1.Running), kubevirtv1.MigrateOptions{DryRun: all})), wantDry: true},
		{name: "crash loop cleared by a command", plan: p(StartPlan(vm(kubevirtv1.RunStrategyManual, func(v *kubevirtv1.VirtualMachine) {
			v.Status.StartFailure = &kubevirtv1.VirtualMachineStartFailure{ConsecutiveFailCount: 3}
		}), nil, kubevirtv1.StartOptions{})), wantOps: []string{`"op":"remove","path":"/status/startFailure"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := tc.plan()
			if tc.wantCode != 0 {
				se, ok := err.(interface{ Status() metav1.Status })
				if !ok {
					t.Fatalf("err = %v, want code %d", err, tc.wantCode)
				}
				if int(se.Status().Code) != tc.wantCode || !strings.Contains(se.Status().Message, tc.wantMsg) {
					t.Fatalf("got %d %q, want %d %q", se.Status().Code, se.Status().Message, tc.wantCode, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if plan.DryRun != tc.wantDry {
				t.Errorf("dry run %t, want %t", plan.DryRun, tc.wantDry)
			}
			if tc.wantSpec != "" && string(plan.SpecMergePatch) != tc.wantSpec {
				t.Errorf("spec patch %s, want %s", plan.SpecMergePatch, tc.wantSpec)
			}
			for _, op := range tc.wantOps {
				if !strings.Contains(string(plan.StatusJSONPatch), op) {
					t.Errorf("status patch %s lacks %s", plan.StatusJSONPatch, op)
				}
			}
		})
	}
}

// p adapts a plan result to a plain error, avoiding a typed nil inside the interface.
func p(plan Plan, serr *apierrors.StatusError) func() (Plan, error) {
	return func() (Plan, error) {
		if serr == nil {
			return plan, nil
		}
		return plan, serr
	}
}

func TestValidateVMICommand(t *testing.T) {
	paused := vmi(kubevirtv1.Running)
	paused.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstancePaused, Status: corev1.ConditionTrue}}
	tests := []struct {
		cmd      string
		vmi      *kubevirtv1.VirtualMachineInstance
		wantCode int32
		wantMsg  string
	}{
		{"pause", vmi(kubevirtv1.Scheduled), 409, "VM is not running"},
		{"pause", paused, 409, "VMI is already paused"},
		{"pause", vmi(kubevirtv1.Running), 0, ""},
		{"unpause", vmi(kubevirtv1.Running), 409, "VMI is not paused"},
		{"unpause", paused, 0, ""},
		{"softreboot", paused, 409, "VMI is paused"},
		{"reset", paused, 409, "VMI is paused"},
		{"reset", vmi(kubevirtv1.Scheduled), 409, "VM is not running"},
		{"reset", vmi(kubevirtv1.Running), 0, ""},
		{"unfreeze", vmi(kubevirtv1.Pending), 409, "VMI is not running"},
		{"console", vmi(kubevirtv1.Scheduling), 400, "VMI is not running"},
		{"vnc", vmi(kubevirtv1.Running), 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.cmd+"/"+string(tc.vmi.Status.Phase), func(t *testing.T) {
			err := ValidateVMICommand(tc.cmd, tc.vmi)
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.ErrStatus.Code != tc.wantCode || !strings.Contains(err.ErrStatus.Message, tc.wantMsg) {
				t.Fatalf("got %v, want %d %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestMigratePlanCreatesAMigration(t *testing.T) {
	v := vm(kubevirtv1.RunStrategyAlways)
	p, serr := MigratePlan(v, vmi(kubevirtv1.Running), kubevirtv1.MigrateOptions{AddedNodeSelector: map[string]string{"zone": "b"}})
	if serr != nil {
		t.Fatal(serr)
	}
	m := p.CreateMigration
	if m == nil || m.GenerateName != "kubevirt-migrate-vm-" || m.Namespace != v.Namespace || m.Spec.VMIName != v.Name || m.Spec.AddedNodeSelector["zone"] != "b" {
		t.Fatalf("migration = %+v", m)
	}
}
