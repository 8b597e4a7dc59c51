package vmop

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// MetricStatusPhase has one series per operation and phase, 1 for the operation's phase and 0
// for the others, as kube-state-metrics' phase gauges.
const MetricStatusPhase = "d8_virtualization_virtualmachineoperation_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.VMOPPhase{
	v1alpha2.VMOPPhasePending, v1alpha2.VMOPPhaseInProgress, v1alpha2.VMOPPhaseCompleted,
	v1alpha2.VMOPPhaseFailed, v1alpha2.VMOPPhaseTerminating, v1alpha2.VMOPPhaseSuperseded,
}

// NewPhaseCollector reports MetricStatusPhase of the operations read through reader (a cache)
// when scraped.
func NewPhaseCollector(reader client.Reader) prometheus.Collector {
	return phasegauge.New(phasegauge.Opts{Name: MetricStatusPhase, Help: "The phase of a VirtualMachineOperation: 1 for its phase, 0 for the others.", Namespaced: true},
		Phases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.VMOPPhase], error) {
			var list v1alpha2.VirtualMachineOperationList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.VMOPPhase], 0, len(list.Items))
			for i := range list.Items {
				op := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.VMOPPhase]{Namespace: op.Namespace, Name: op.Name, Phase: GaugePhase(op)})
			}
			return objects, nil
		})
}

// GaugePhase is the operation's phase for the gauge: an operation without a phase yet is Pending and
// one being deleted Terminating.
func GaugePhase(op *v1alpha2.VirtualMachineOperation) v1alpha2.VMOPPhase {
	switch {
	case op.DeletionTimestamp != nil:
		return v1alpha2.VMOPPhaseTerminating
	case op.Status.Phase == "":
		return v1alpha2.VMOPPhasePending
	}
	return op.Status.Phase
}
