package image

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
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

// NewPhaseCollector reports MetricStatusPhase of the images of kind k read through reader (a
// cache) when scraped.
func NewPhaseCollector(k Kind, reader client.Reader) prometheus.Collector {
	opts := phasegauge.Opts{Name: MetricStatusPhase(k), Help: "The phase of a " + k.Name() + ": 1 for its phase, 0 for the others.", Namespaced: k.Namespaced()}
	return phasegauge.New(opts, Phases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.ImagePhase], error) {
		list := k.NewList()
		if err := reader.List(ctx, list); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, fmt.Errorf("extract %s list: %w", k.Name(), err)
		}
		objects := make([]phasegauge.Object[v1alpha2.ImagePhase], 0, len(items))
		for _, item := range items {
			obj := item.(client.Object)
			objects = append(objects, phasegauge.Object[v1alpha2.ImagePhase]{Namespace: obj.GetNamespace(), Name: obj.GetName(), Phase: GaugePhase(View(k, obj))})
		}
		return objects, nil
	})
}

// GaugePhase is img's phase for the gauge: an image without a phase yet is Pending and one being
// deleted Terminating.
func GaugePhase(img Image) v1alpha2.ImagePhase {
	switch {
	case img.Object.GetDeletionTimestamp() != nil:
		return v1alpha2.ImageTerminating
	case img.Status.Phase == "":
		return v1alpha2.ImagePending
	}
	return img.Status.Phase
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
