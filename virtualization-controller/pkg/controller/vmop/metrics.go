package vmop

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// MetricStatusPhase has one series per operation and phase, 1 for the operation's phase and 0
// for the others, as kube-state-metrics' phase gauges.
const MetricStatusPhase = "d8_virtualization_virtualmachineoperation_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.VMOPPhase{
	v1alpha2.VMOPPhasePending, v1alpha2.VMOPPhaseInProgress, v1alpha2.VMOPPhaseCompleted,
	v1alpha2.VMOPPhaseFailed, v1alpha2.VMOPPhaseTerminating, v1alpha2.VMOPPhaseSuperseded,
}

// PhaseCollector reports MetricStatusPhase from a (cached) reader when scraped.
type PhaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// NewPhaseCollector reads the operations through reader.
func NewPhaseCollector(reader client.Reader) *PhaseCollector {
	return &PhaseCollector{reader: reader, desc: prometheus.NewDesc(MetricStatusPhase,
		"The phase of a VirtualMachineOperation: 1 for its phase, 0 for the others.", []string{"namespace", "name", "phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha2.VirtualMachineOperationList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for i := range list.Items {
		op := &list.Items[i]
		for phase, v := range PhaseValues(op) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, op.Namespace, op.Name, string(phase))
		}
	}
}

// PhaseValues is 1 for the operation's phase and 0 for every other phase; an operation without a
// phase yet is Pending and one being deleted Terminating.
func PhaseValues(op *v1alpha2.VirtualMachineOperation) map[v1alpha2.VMOPPhase]float64 {
	phase := op.Status.Phase
	switch {
	case op.DeletionTimestamp != nil:
		phase = v1alpha2.VMOPPhaseTerminating
	case phase == "":
		phase = v1alpha2.VMOPPhasePending
	}
	m := make(map[v1alpha2.VMOPPhase]float64, len(Phases))
	for _, p := range Phases {
		m[p] = 0
	}
	m[phase] = 1
	return m
}
