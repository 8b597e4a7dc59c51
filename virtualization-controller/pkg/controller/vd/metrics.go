package vd

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// MetricStatusPhase has one series per disk and phase, 1 for the disk's phase and 0 for the
// others, as kube-state-metrics' phase gauges.
const MetricStatusPhase = "d8_virtualization_virtualdisk_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.DiskPhase{
	v1alpha2.DiskPending, v1alpha2.DiskProvisioning, v1alpha2.DiskWaitForUserUpload, v1alpha2.DiskWaitForFirstConsumer,
	v1alpha2.DiskReady, v1alpha2.DiskResizing, v1alpha2.DiskFailed, v1alpha2.DiskLost, v1alpha2.DiskTerminating,
}

// PhaseCollector reports MetricStatusPhase from a (cached) reader when scraped.
type PhaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// NewPhaseCollector reads the disks through reader.
func NewPhaseCollector(reader client.Reader) *PhaseCollector {
	return &PhaseCollector{reader: reader, desc: prometheus.NewDesc(MetricStatusPhase,
		"The phase of a VirtualDisk: 1 for its phase, 0 for the others.", []string{"namespace", "name", "phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha2.VirtualDiskList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for i := range list.Items {
		vd := &list.Items[i]
		for phase, v := range PhaseValues(vd) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, vd.Namespace, vd.Name, string(phase))
		}
	}
}

// PhaseValues is 1 for vd's phase and 0 for every other phase; a disk without a phase yet is
// Pending and one being deleted Terminating.
func PhaseValues(vd *v1alpha2.VirtualDisk) map[v1alpha2.DiskPhase]float64 {
	phase := vd.Status.Phase
	switch {
	case vd.DeletionTimestamp != nil:
		phase = v1alpha2.DiskTerminating
	case phase == "":
		phase = v1alpha2.DiskPending
	}
	m := make(map[v1alpha2.DiskPhase]float64, len(Phases))
	for _, p := range Phases {
		m[p] = 0
	}
	m[phase] = 1
	return m
}
