package vd

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// MetricStatusPhase has one series per disk and phase, 1 for the disk's phase and 0 for the
// others, as kube-state-metrics' phase gauges.
const MetricStatusPhase = "d8_virtualization_virtualdisk_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.DiskPhase{
	v1alpha2.DiskPending, v1alpha2.DiskProvisioning, v1alpha2.DiskWaitForUserUpload, v1alpha2.DiskWaitForFirstConsumer,
	v1alpha2.DiskReady, v1alpha2.DiskResizing, v1alpha2.DiskFailed, v1alpha2.DiskLost, v1alpha2.DiskTerminating,
}

// NewPhaseCollector reports MetricStatusPhase of the disks read through reader (a cache) when
// scraped.
func NewPhaseCollector(reader client.Reader) prometheus.Collector {
	return phasegauge.New(phasegauge.Opts{Name: MetricStatusPhase, Help: "The phase of a VirtualDisk: 1 for its phase, 0 for the others.", Namespaced: true},
		Phases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.DiskPhase], error) {
			var list v1alpha2.VirtualDiskList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.DiskPhase], 0, len(list.Items))
			for i := range list.Items {
				vd := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.DiskPhase]{Namespace: vd.Namespace, Name: vd.Name, Phase: GaugePhase(vd)})
			}
			return objects, nil
		})
}

// GaugePhase is vd's phase for the gauge: a disk without a phase yet is Pending and one being deleted
// Terminating.
func GaugePhase(vd *v1alpha2.VirtualDisk) v1alpha2.DiskPhase {
	switch {
	case vd.DeletionTimestamp != nil:
		return v1alpha2.DiskTerminating
	case vd.Status.Phase == "":
		return v1alpha2.DiskPending
	}
	return vd.Status.Phase
}
