package vm

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmclasscondition"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	"github.com/d8virt/api/core/v1alpha2/vmipcondition"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)) }

func dur(sec int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(sec) * time.Second}
}

func TestLaunchDurations(t *testing.T) {
	tr := func(phases ...any) []v1alpha2.VirtualMachinePhaseTransition {
		var out []v1alpha2.VirtualMachinePhaseTransition
		for i := 0; i < len(phases); i += 2 {
			out = append(out, v1alpha2.VirtualMachinePhaseTransition{Phase: phases[i].(v1alpha2.MachinePhase), Timestamp: at(phases[i+1].(int))})
		}
		return out
	}
	agent := func(sec int) *metav1.Time { a := at(sec); return &a }
	old := v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(100), VirtualMachineStarting: dur(200), GuestOSAgentStarting: dur(300)}
	P, S, R, St, M := v1alpha2.MachinePending, v1alpha2.MachineStarting, v1alpha2.MachineRunning, v1alpha2.MachineStopped, v1alpha2.MachineMigrating
	for _, tc := range []struct {
		name  string
		old   v1alpha2.VirtualMachineLaunchTimeDuration
		ts    []v1alpha2.VirtualMachinePhaseTransition
		agent *metav1.Time
		want  v1alpha2.VirtualMachineLaunchTimeDuration
	}{
		{name: "still pending", ts: tr(P, 0)},
		{name: "starting", ts: tr(P, 0, S, 4), want: v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(4)}},
		{name: "running, no agent", ts: tr(P, 0, S, 4, R, 10), want: v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(4), VirtualMachineStarting: dur(6)}},
		{name: "the agent answers", ts: tr(P, 0, S, 4, R, 10), agent: agent(13),
			want: v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(4), VirtualMachineStarting: dur(6), GuestOSAgentStarting: dur(3)}},
		{name: "AlwaysOff first: Pending's own time", ts: tr(P, 0, St, 2, S, 50, R, 53), agent: agent(54),
			want: v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(2), VirtualMachineStarting: dur(3), GuestOSAgentStarting: dur(1)}},
		{name: "a migration is no start", ts: tr(S, 4, R, 10, M, 20, R, 30), agent: agent(12),
			want: v1alpha2.VirtualMachineLaunchTimeDuration{VirtualMachineStarting: dur(6), GuestOSAgentStarting: dur(2)}},
		{name: "a restart in progress keeps the last figures but the wait", old: old, ts: tr(S, 4, R, 10, St, 20, S, 30),
			want: v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(100), VirtualMachineStarting: dur(200), GuestOSAgentStarting: dur(300)}},
		{name: "an agent from before the start is not counted", old: old, ts: tr(S, 30, R, 40), agent: agent(12),
			want: v1alpha2.VirtualMachineLaunchTimeDuration{WaitingForDependencies: dur(100), VirtualMachineStarting: dur(10), GuestOSAgentStarting: dur(300)}},
		{name: "transitions gone: old kept", old: old, ts: tr(R, 40), want: old},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LaunchDurations(tc.old, tc.ts, tc.agent); !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMigrationState(t *testing.T) {
	start, end := at(1), at(9)
	old := &v1alpha2.VirtualMachineMigrationState{Result: v1alpha2.MigrationResultSucceeded}
	vmi := func(m *kubevirtv1.VirtualMachineInstanceMigrationState) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{MigrationState: m}}
	}
	base := kubevirtv1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, SourceNode: "n1", SourcePod: "p1", TargetNode: "n2", TargetPod: "p2"}
	withEnd := func(completed, failed bool) *kubevirtv1.VirtualMachineInstanceMigrationState {
		m := base.DeepCopy()
		m.EndTimestamp, m.Completed, m.Failed = &end, completed, failed
		return m
	}
	want := func(end *metav1.Time, result v1alpha2.MigrationResult) *v1alpha2.VirtualMachineMigrationState {
		return &v1alpha2.VirtualMachineMigrationState{StartTimestamp: &start, EndTimestamp: end, Result: result,
			Source: v1alpha2.VirtualMachineLocation{Node: "n1", Pod: "p1"}, Target: v1alpha2.VirtualMachineLocation{Node: "n2", Pod: "p2"}}
	}
	for _, tc := range []struct {
		name string
		vmi  *kubevirtv1.VirtualMachineInstance
		want *v1alpha2.VirtualMachineMigrationState
	}{
		{name: "no VMI: the last one kept", want: old},
		{name: "a VMI never migrated: the last one kept", vmi: vmi(nil), want: old},
		{name: "running", vmi: vmi(base.DeepCopy()), want: want(nil, "")},
		{name: "succeeded", vmi: vmi(withEnd(true, false)), want: want(&end, v1alpha2.MigrationResultSucceeded)},
		{name: "failed", vmi: vmi(withEnd(true, true)), want: want(&end, v1alpha2.MigrationResultFailed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MigrationState(old, tc.vmi); !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestMigratableCondition(t *testing.T) {
	vmi := func(phase kubevirtv1.VirtualMachineInstancePhase, conds ...kubevirtv1.VirtualMachineInstanceCondition) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: phase, Conditions: conds}}
	}
	live := func(s corev1.ConditionStatus, reason, msg string) kubevirtv1.VirtualMachineInstanceCondition {
		return kubevirtv1.VirtualMachineInstanceCondition{Type: kubevirtv1.VirtualMachineInstanceIsMigratable, Status: s, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name                string
		vmi                 *kubevirtv1.VirtualMachineInstance
		status, reason, msg string // status empty: no condition
	}{
		{name: "no VMI"},
		{name: "not running", vmi: vmi(kubevirtv1.Scheduling, live(corev1.ConditionTrue, "", ""))},
		{name: "the core reports none", vmi: vmi(kubevirtv1.Running)},
		{name: "migratable", vmi: vmi(kubevirtv1.Running, live(corev1.ConditionTrue, "", "")), status: "True", reason: "VirtualMachineMigratable", msg: "the VM can be migrated live"},
		{name: "not migratable, with the core's reason", vmi: vmi(kubevirtv1.Running, live(corev1.ConditionFalse, "DisksNotLiveMigratable", "PVC root is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)")),
			status: "False", reason: "VirtualMachineNotMigratable", msg: "DisksNotLiveMigratable: PVC root is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := MigratableCondition(tc.vmi)
			switch {
			case tc.status == "" && c != nil:
				t.Fatalf("condition %+v, want none", c)
			case tc.status == "":
			case c == nil:
				t.Fatal("no condition")
			case string(c.Status) != tc.status || c.Reason != tc.reason || c.Message != tc.msg:
				t.Errorf("got %s %s %q, want %s %s %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.msg)
			}
		})
	}
}

func TestSizingCondition(t *testing.T) {
	class := &v1alpha3.VirtualMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: v1alpha3.VirtualMachineClassSpec{
		SizingPolicies: []v1alpha3.SizingPolicy{{SizingPolicyResources: v1alpha2.SizingPolicyResources{Cores: &v1alpha2.SizingPolicyCores{Min: 1, Max: 2}}}},
	}}
	vm := func(cores int) *v1alpha2.VirtualMachine {
		return &v1alpha2.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: v1alpha2.VirtualMachineSpec{CPU: v1alpha2.CPUSpec{Cores: cores}, Memory: v1alpha2.MemorySpec{Size: resource.MustParse("1Gi")}}}
	}
	if c := SizingCondition(vm(2), class); c != nil {
		t.Errorf("fits: %+v", c)
	}
	if c := SizingCondition(vm(8), nil); c != nil {
		t.Errorf("no class: %+v", c)
	}
	c := SizingCondition(vm(8), class)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "SizingPolicyNotMatched" ||
		c.Message != "spec.cpu.cores: Invalid value: 8: virtual machine web has no valid size policy in vm class small" {
		t.Errorf("8 cores: %+v", c)
	}
}

func TestIPAddressMessage(t *testing.T) {
	ip := func(addr, boundMsg string) *v1alpha2.VirtualMachineIPAddress {
		v := &v1alpha2.VirtualMachineIPAddress{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Status: v1alpha2.VirtualMachineIPAddressStatus{Address: addr}}
		if boundMsg != "" {
			v.Status.Conditions = []metav1.Condition{{Type: string(vmipcondition.BoundType), Status: metav1.ConditionFalse, Message: boundMsg}}
		}
		return v
	}
	for _, tc := range []struct {
		ip     *v1alpha2.VirtualMachineIPAddress
		want   string
		reason vmcondition.Reason
	}{
		{want: "waiting for the VirtualMachineIPAddress web", reason: vmcondition.ReasonIPAddressNotAssigned},
		{ip: ip("10.66.10.2", ""), want: "VirtualMachineIPAddress web: 10.66.10.2", reason: vmcondition.ReasonIPAddressNotAssigned},
		{ip: ip("", ""), want: "VirtualMachineIPAddress web has no address yet", reason: vmcondition.ReasonIPAddressNotAssigned},
		{ip: ip("", "virtualMachineCIDRs is empty"), want: "VirtualMachineIPAddress web has no address yet: virtualMachineCIDRs is empty", reason: vmcondition.ReasonIPAddressNotAvailable},
	} {
		if got, reason := ipAddressMessage("web", tc.ip); got != tc.want || reason != tc.reason {
			t.Errorf("got %q %s, want %q %s", got, reason, tc.want, tc.reason)
		}
	}
}

// status.versions: the running VMI's versions from the core's annotations, kept while stopped.
func TestVersions(t *testing.T) {
	versions := map[string]string{AnnotationQEMUVersion: "9.2.0", AnnotationLibvirtVersion: "10.10.0"}
	running := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Annotations: versions}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	starting := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Annotations: versions}, Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduling}}
	want := v1alpha2.Versions{Qemu: "9.2.0", Libvirt: "10.10.0"}
	old := v1alpha2.Versions{Qemu: "8.0.0", Libvirt: "9.0.0"}
	for _, tc := range []struct {
		name string
		had  v1alpha2.Versions
		vmi  *kubevirtv1.VirtualMachineInstance
		want v1alpha2.Versions
	}{
		{"running", v1alpha2.Versions{}, running, want},
		{"running on a newer launcher", old, running, want},
		{"not running yet: none", v1alpha2.Versions{}, starting, v1alpha2.Versions{}},
		{"stopped: the last run's kept", old, nil, old},
	} {
		vm := friendlyVM()
		vm.Status.Versions = tc.had
		in := &StatusInputs{VM: vm, Internal: &kubevirtv1.VirtualMachine{}, VMI: tc.vmi, Now: at(0)}
		if got := Status(in).Versions; got != tc.want {
			t.Errorf("%s: versions %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestClassProblem(t *testing.T) {
	now := metav1.Now()
	class := func(cpu v1alpha2.CPUType, deleted bool, discovered ...metav1.Condition) *v1alpha3.VirtualMachineClass {
		c := &v1alpha3.VirtualMachineClass{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec: v1alpha3.VirtualMachineClassSpec{CPU: v1alpha2.CPU{Type: cpu}}, Status: v1alpha2.VirtualMachineClassStatus{Conditions: discovered}}
		if deleted {
			c.DeletionTimestamp = &now
		}
		return c
	}
	found := metav1.Condition{Type: string(vmclasscondition.TypeDiscovered), Status: metav1.ConditionTrue, Reason: "DiscoverySucceeded"}
	failed := metav1.Condition{Type: string(vmclasscondition.TypeDiscovered), Status: metav1.ConditionFalse, Reason: "DiscoveryFailed", Message: "no node"}
	for _, tc := range []struct {
		name  string
		class *v1alpha3.VirtualMachineClass
		want  string
	}{
		{"ready", class(v1alpha2.CPUTypeHost, false), ""},
		{"not found", nil, "VirtualMachineClass c not found"},
		{"being deleted", class(v1alpha2.CPUTypeHost, true), "VirtualMachineClass c is being deleted"},
		{"discovered", class(v1alpha2.CPUTypeDiscovery, false, found), ""},
		{"discovery failed", class(v1alpha2.CPUTypeDiscovery, false, failed), "VirtualMachineClass c has not discovered its processor features yet: no node"},
		{"discovery not run", class(v1alpha2.CPUTypeDiscovery, false), "VirtualMachineClass c has not discovered its processor features yet"},
	} {
		if got := ClassProblem("c", tc.class); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
