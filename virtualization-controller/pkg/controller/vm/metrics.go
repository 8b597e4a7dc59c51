package vm

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha2/vmcondition"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// The metrics, kube-state-metrics style: one series per VM (per phase for the phase), labelled
// name and namespace.
const (
	MetricStatusPhase     = "d8_virtualization_virtualmachine_status_phase"
	MetricCPUCores        = "d8_virtualization_virtualmachine_configuration_cpu_cores"
	MetricCPUCoreFraction = "d8_virtualization_virtualmachine_configuration_cpu_core_fraction"
	MetricMemorySize      = "d8_virtualization_virtualmachine_configuration_memory_size_bytes"
	MetricAgentReady      = "d8_virtualization_virtualmachine_agent_ready"
	MetricAwaitingRestart = "d8_virtualization_virtualmachine_awaiting_restart_to_apply_configuration"
)

// Phases are the phases a series exists for.
var Phases = []v1alpha2.MachinePhase{
	v1alpha2.MachinePending, v1alpha2.MachineStarting, v1alpha2.MachineRunning, v1alpha2.MachineStopping,
	v1alpha2.MachineStopped, v1alpha2.MachineMigrating, v1alpha2.MachinePause, v1alpha2.MachineTerminating,
}

// Collector reports the configuration gauges from a (cached) reader when scraped.
type Collector struct {
	reader                                  client.Reader
	cores, fraction, memory, agent, restart *prometheus.Desc
}

// NewCollector reports the metrics of the VMs read through reader: the phase gauge and the
// configuration gauges.
func NewCollector(reader client.Reader) prometheus.Collector {
	labels := []string{"name", "namespace"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	phase := phasegauge.New(phasegauge.Opts{Name: MetricStatusPhase, Help: "The phase of a VirtualMachine: 1 for its phase, 0 for the others.", Namespaced: true},
		Phases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.MachinePhase], error) {
			var list v1alpha2.VirtualMachineList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.MachinePhase], 0, len(list.Items))
			for i := range list.Items {
				vm := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.MachinePhase]{Namespace: vm.Namespace, Name: vm.Name, Phase: GaugePhase(vm)})
			}
			return objects, nil
		})
	return phasegauge.Join(phase, &Collector{
		reader:   reader,
		cores:    d(MetricCPUCores, "The virtual CPU cores a VirtualMachine's spec asks for."),
		fraction: d(MetricCPUCoreFraction, "The guaranteed share of each core a VirtualMachine runs with, as a ratio (0.05 to 1)."),
		memory:   d(MetricMemorySize, "The memory a VirtualMachine's spec asks for, in bytes."),
		agent:    d(MetricAgentReady, "1 when a VirtualMachine's guest agent answers, else 0."),
		restart:  d(MetricAwaitingRestart, "1 when a VirtualMachine has changes that wait for a restart, else 0."),
	})
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cores, c.fraction, c.memory, c.agent, c.restart} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha2.VirtualMachineList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.cores, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, vm *v1alpha2.VirtualMachine) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, vm.Name, vm.Namespace)
	}
	for i := range list.Items {
		vm := &list.Items[i]
		gauge(c.cores, float64(vm.Spec.CPU.Cores), vm)
		if f, err := ParseCoreFraction(vm.Status.Resources.CPU.CoreFraction); err == nil {
			gauge(c.fraction, float64(f)/100, vm)
		}
		gauge(c.memory, float64(vm.Spec.Memory.Size.Value()), vm)
		gauge(c.agent, conditionValue(vm, vmcondition.TypeAgentReady), vm)
		gauge(c.restart, conditionValue(vm, vmcondition.TypeAwaitingRestartToApplyConfiguration), vm)
	}
}

func conditionValue(vm *v1alpha2.VirtualMachine, t vmcondition.Type) float64 {
	if meta.IsStatusConditionPresentAndEqual(vm.Status.Conditions, string(t), metav1.ConditionTrue) {
		return 1
	}
	return 0
}

// GaugePhase is vm's phase for the gauge: a VM without a phase yet is Pending and one being deleted
// Terminating.
func GaugePhase(vm *v1alpha2.VirtualMachine) v1alpha2.MachinePhase {
	switch {
	case vm.DeletionTimestamp != nil:
		return v1alpha2.MachineTerminating
	case vm.Status.Phase == "":
		return v1alpha2.MachinePending
	}
	return vm.Status.Phase
}
