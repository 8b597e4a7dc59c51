package cvi

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// MetricStatusPhase has one series per image and phase, 1 for the image's phase and 0 for the
// others, as kube-state-metrics' phase gauges.
const MetricStatusPhase = "d8_virtualization_clustervirtualimage_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.ImagePhase{
	v1alpha2.ImagePending, v1alpha2.ImageWaitForUserUpload, v1alpha2.ImageProvisioning, v1alpha2.ImageReady,
	v1alpha2.ImageFailed, v1alpha2.ImageLost, v1alpha2.ImagePVCLost, v1alpha2.ImageTerminating,
}

// PhaseCollector reports MetricStatusPhase from a (cached) reader when scraped.
type PhaseCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

// NewPhaseCollector reads the images through reader.
func NewPhaseCollector(reader client.Reader) *PhaseCollector {
	return &PhaseCollector{reader: reader, desc: prometheus.NewDesc(MetricStatusPhase,
		"The phase of a ClusterVirtualImage: 1 for its phase, 0 for the others.", []string{"name", "phase"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var list v1alpha2.ClusterVirtualImageList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for i := range list.Items {
		cvi := &list.Items[i]
		for phase, v := range PhaseValues(cvi) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, cvi.Name, string(phase))
		}
	}
}

// PhaseValues is 1 for cvi's phase and 0 for every other phase; an image without a phase yet is
// Pending and one being deleted Terminating.
func PhaseValues(cvi *v1alpha2.ClusterVirtualImage) map[v1alpha2.ImagePhase]float64 {
	phase := cvi.Status.Phase
	switch {
	case cvi.DeletionTimestamp != nil:
		phase = v1alpha2.ImageTerminating
	case phase == "":
		phase = v1alpha2.ImagePending
	}
	m := make(map[v1alpha2.ImagePhase]float64, len(Phases))
	for _, p := range Phases {
		m[p] = 0
	}
	m[phase] = 1
	return m
}
