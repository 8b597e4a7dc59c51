package vmbda

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// MetricStatusPhase has one series per attachment and phase, 1 for the attachment's phase and 0
// for the others, as kube-state-metrics' phase gauges.
const MetricStatusPhase = "d8_virtualization_virtualmachineblockdeviceattachment_status_phase"

// Phases are the phases a series exists for.
var Phases = []v1alpha2.BlockDeviceAttachmentPhase{
	v1alpha2.BlockDeviceAttachmentPhasePending, v1alpha2.BlockDeviceAttachmentPhaseInProgress, v1alpha2.BlockDeviceAttachmentPhaseAttached,
	v1alpha2.BlockDeviceAttachmentPhaseFailed, v1alpha2.BlockDeviceAttachmentPhaseTerminating,
}

// NewPhaseCollector reports MetricStatusPhase of the attachments read through reader (a cache)
// when scraped.
func NewPhaseCollector(reader client.Reader) prometheus.Collector {
	return phasegauge.New(phasegauge.Opts{Name: MetricStatusPhase, Help: "The phase of a VirtualMachineBlockDeviceAttachment: 1 for its phase, 0 for the others.", Namespaced: true},
		Phases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.BlockDeviceAttachmentPhase], error) {
			var list v1alpha2.VirtualMachineBlockDeviceAttachmentList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.BlockDeviceAttachmentPhase], 0, len(list.Items))
			for i := range list.Items {
				a := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.BlockDeviceAttachmentPhase]{Namespace: a.Namespace, Name: a.Name, Phase: GaugePhase(a)})
			}
			return objects, nil
		})
}

// GaugePhase is the attachment's phase for the gauge: one without a phase yet is Pending and one
// being deleted Terminating.
func GaugePhase(a *v1alpha2.VirtualMachineBlockDeviceAttachment) v1alpha2.BlockDeviceAttachmentPhase {
	switch {
	case a.DeletionTimestamp != nil:
		return v1alpha2.BlockDeviceAttachmentPhaseTerminating
	case a.Status.Phase == "":
		return v1alpha2.BlockDeviceAttachmentPhasePending
	}
	return a.Status.Phase
}
