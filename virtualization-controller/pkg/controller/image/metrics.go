package image

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// MetricStatusPhase is the phase gauge of kind k, e.g.
// d8_virtualization_clustervirtualimage_status_phase: one series per image and phase, 1 for the
// image's phase and 0 for the others, as kube-state-metrics' phase gauges.
func MetricStatusPhase(k Kind) string {
	return "d8_virtualization_" + strings.ToLower(k.Name()) + "_status_phase"
}

// Phases are the phases a series exists for.
var Phases = []v1alpha2.ImagePhase{
	v1alpha2.ImagePending, v1alpha2.ImageWaitForUserUpload, v1alpha2.ImageProvisioning, v1alpha2.ImageReady,
	v1alpha2.ImageFailed, v1alpha2.ImageLost, v1alpha2.ImagePVCLost, v1alpha2.ImageTerminating,
}

// PhaseCollector reports MetricStatusPhase from a (cached) reader when scraped.
type PhaseCollector struct {
	kind   Kind
	reader client.Reader
	desc   *prometheus.Desc
}

// NewPhaseCollector reads the images of kind k through reader.
func NewPhaseCollector(k Kind, reader client.Reader) *PhaseCollector {
	labels := []string{"name", "phase"}
	if k.Namespaced() {
		labels = []string{"namespace", "name", "phase"}
	}
	return &PhaseCollector{kind: k, reader: reader, desc: prometheus.NewDesc(MetricStatusPhase(k),
		"The phase of a "+k.Name()+": 1 for its phase, 0 for the others.", labels, nil)}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := c.kind.NewList()
	if err := c.reader.List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, item := range items {
		obj := item.(client.Object)
		for phase, v := range PhaseValues(View(c.kind, obj)) {
			labels := []string{obj.GetName(), string(phase)}
			if c.kind.Namespaced() {
				labels = append([]string{obj.GetNamespace()}, labels...)
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, labels...)
		}
	}
}

// PhaseValues is 1 for img's phase and 0 for every other phase; an image without a phase yet is
// Pending and one being deleted Terminating.
func PhaseValues(img Image) map[v1alpha2.ImagePhase]float64 {
	phase := img.Status.Phase
	switch {
	case img.Object.GetDeletionTimestamp() != nil:
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

// The import metrics' names.
const (
	MetricImportDuration    = "d8_virtualization_image_import_duration_seconds"
	MetricImportSourceBytes = "d8_virtualization_image_import_source_bytes"
)

// ImportMetrics are the histograms of finished imports, by kind (cvi, vi) and the importer's
// reason (Completed or why it failed).
type ImportMetrics struct {
	duration *prometheus.HistogramVec
	bytes    *prometheus.HistogramVec
}

// NewImportMetrics makes the histograms; Collectors registers them.
func NewImportMetrics() *ImportMetrics {
	labels := []string{"kind", "reason"}
	return &ImportMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricImportDuration,
			Help:    "How long an import took, from its importer Pod's creation to the importer's end.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14)}, labels),
		bytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricImportSourceBytes,
			Help:    "The bytes an import read from its source, as served.",
			Buckets: prometheus.ExponentialBuckets(1<<20, 4, 10)}, labels),
	}
}

// Collectors are the metrics to register.
func (m *ImportMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.duration, m.bytes}
}

// Observe records one finished import of kind short; seconds 0 (not known) is left out.
func (m *ImportMetrics) Observe(short string, r contract.Result, seconds float64) {
	if seconds > 0 {
		m.duration.WithLabelValues(short, string(r.Reason)).Observe(seconds)
	}
	m.bytes.WithLabelValues(short, string(r.Reason)).Observe(float64(r.SourceSize))
}
