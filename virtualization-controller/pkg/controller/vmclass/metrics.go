package vmclass

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	v1alpha3 "github.com/d8virt/api/core/v1alpha3"
)

// MetricStatusPhase has one series per class and phase, 1 for the class's phase and 0 for the
// others.
const MetricStatusPhase = "d8_virtualization_virtualmachineclass_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.VirtualMachineClassPhase{v1alpha2.ClassPhasePending, v1alpha2.ClassPhaseReady, v1alpha2.ClassPhaseTerminating}

// PhaseCollector reports MetricStatusPhase from a (cached) reader when scraped.
type PhaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// NewPhaseCollector reads the classes through reader.
func NewPhaseCollector(reader client.Reader) *PhaseCollector {
	return &PhaseCollector{reader: reader, desc: prometheus.NewDesc(MetricStatusPhase,
		"The phase of a VirtualMachineClass: 1 for its phase, 0 for the others.", []string{"name", "phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha3.VirtualMachineClassList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for i := range list.Items {
		class := &list.Items[i]
		phase := class.Status.Phase
		switch {
		case class.DeletionTimestamp != nil:
			phase = v1alpha2.ClassPhaseTerminating
		case phase == "":
			phase = v1alpha2.ClassPhasePending
		}
		for _, p := range Phases {
			v := 0.0
			if p == phase {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, class.Name, string(p))
		}
	}
}
