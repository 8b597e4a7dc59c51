package vmclass

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// MetricStatusPhase has one series per class and phase, 1 for the class's phase and 0 for the
// others.
const MetricStatusPhase = "d8_virtualization_virtualmachineclass_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.VirtualMachineClassPhase{v1alpha2.ClassPhasePending, v1alpha2.ClassPhaseReady, v1alpha2.ClassPhaseTerminating}

// NewPhaseCollector reports MetricStatusPhase of the classes read through reader (a cache) when
// scraped.
func NewPhaseCollector(reader client.Reader) prometheus.Collector {
	return phasegauge.New(phasegauge.Opts{Name: MetricStatusPhase, Help: "The phase of a VirtualMachineClass: 1 for its phase, 0 for the others."},
		Phases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.VirtualMachineClassPhase], error) {
			var list v1alpha3.VirtualMachineClassList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.VirtualMachineClassPhase], 0, len(list.Items))
			for i := range list.Items {
				class := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.VirtualMachineClassPhase]{Name: class.Name, Phase: GaugePhase(class)})
			}
			return objects, nil
		})
}

// GaugePhase is the class's phase for the gauge: a class without a phase yet is Pending and one being
// deleted Terminating.
func GaugePhase(class *v1alpha3.VirtualMachineClass) v1alpha2.VirtualMachineClassPhase {
	switch {
	case class.DeletionTimestamp != nil:
		return v1alpha2.ClassPhaseTerminating
	case class.Status.Phase == "":
		return v1alpha2.ClassPhasePending
	}
	return class.Status.Phase
}
