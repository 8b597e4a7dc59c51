package vm

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// A running VM with its agent and a change awaiting a restart, and a stopped one.
func TestCollector(t *testing.T) {
	running := reconcilerVM()
	running.Status = v1alpha2.VirtualMachineStatus{
		Phase:     v1alpha2.MachineRunning,
		Resources: v1alpha2.ResourcesStatus{CPU: v1alpha2.CPUStatus{CoreFraction: "25%"}},
		Conditions: []metav1.Condition{
			{Type: string(vmcondition.TypeAgentReady), Status: metav1.ConditionTrue},
			{Type: string(vmcondition.TypeAwaitingRestartToApplyConfiguration), Status: metav1.ConditionTrue},
		},
	}
	stopped := reconcilerVM()
	stopped.Name = "db"
	stopped.Status.Phase = v1alpha2.MachineStopped
	w := newWorld(t, running, stopped)
	want := `
# HELP d8_virtualization_virtualmachine_agent_ready 1 when a VirtualMachine's guest agent answers, else 0.
# TYPE d8_virtualization_virtualmachine_agent_ready gauge
d8_virtualization_virtualmachine_agent_ready{name="db",namespace="ns"} 0
d8_virtualization_virtualmachine_agent_ready{name="web",namespace="ns"} 1
# HELP d8_virtualization_virtualmachine_awaiting_restart_to_apply_configuration 1 when a VirtualMachine has changes that wait for a restart, else 0.
# TYPE d8_virtualization_virtualmachine_awaiting_restart_to_apply_configuration gauge
d8_virtualization_virtualmachine_awaiting_restart_to_apply_configuration{name="db",namespace="ns"} 0
d8_virtualization_virtualmachine_awaiting_restart_to_apply_configuration{name="web",namespace="ns"} 1
# HELP d8_virtualization_virtualmachine_configuration_cpu_core_fraction The guaranteed share of each core a VirtualMachine runs with, as a ratio (0.05 to 1).
# TYPE d8_virtualization_virtualmachine_configuration_cpu_core_fraction gauge
d8_virtualization_virtualmachine_configuration_cpu_core_fraction{name="web",namespace="ns"} 0.25
# HELP d8_virtualization_virtualmachine_configuration_cpu_cores The virtual CPU cores a VirtualMachine's spec asks for.
# TYPE d8_virtualization_virtualmachine_configuration_cpu_cores gauge
d8_virtualization_virtualmachine_configuration_cpu_cores{name="db",namespace="ns"} 2
d8_virtualization_virtualmachine_configuration_cpu_cores{name="web",namespace="ns"} 2
# HELP d8_virtualization_virtualmachine_configuration_memory_size_bytes The memory a VirtualMachine's spec asks for, in bytes.
# TYPE d8_virtualization_virtualmachine_configuration_memory_size_bytes gauge
d8_virtualization_virtualmachine_configuration_memory_size_bytes{name="db",namespace="ns"} 1.073741824e+09
d8_virtualization_virtualmachine_configuration_memory_size_bytes{name="web",namespace="ns"} 1.073741824e+09
`
	names := []string{MetricAgentReady, MetricAwaitingRestart, MetricCPUCoreFraction, MetricCPUCores, MetricMemorySize}
	if err := testutil.CollectAndCompare(NewCollector(w.c), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	phases := map[string]float64{}
	for p, v := range phasegauge.Values(Phases, GaugePhase(running)) {
		phases[string(p)] = v
	}
	if phases["Running"] != 1 || phases["Stopped"] != 0 || len(phases) != len(Phases) {
		t.Errorf("phase values %v", phases)
	}
	if n := testutil.CollectAndCount(NewCollector(w.c), MetricStatusPhase); n != 2*len(Phases) {
		t.Errorf("%d phase series, want %d", n, 2*len(Phases))
	}
}
