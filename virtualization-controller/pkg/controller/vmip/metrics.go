package vmip

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/phasegauge"
)

// The phase gauges: one series per object and phase, 1 for the object's phase and 0 for the
// others, as kube-state-metrics' phase gauges.
const (
	MetricAddressPhase = "d8_virtualization_virtualmachineipaddress_status_phase"
	MetricLeasePhase   = "d8_virtualization_virtualmachineipaddresslease_status_phase"
)

// AddressPhases and LeasePhases are the phases a series exists for.
var (
	AddressPhases = []v1alpha2.VirtualMachineIPAddressPhase{
		v1alpha2.VirtualMachineIPAddressPhasePending, v1alpha2.VirtualMachineIPAddressPhaseBound, v1alpha2.VirtualMachineIPAddressPhaseAttached,
	}
	LeasePhases = []v1alpha2.VirtualMachineIPAddressLeasePhase{
		v1alpha2.VirtualMachineIPAddressLeasePhaseBound, v1alpha2.VirtualMachineIPAddressLeasePhaseReleased,
	}
)

// NewPhaseCollector reports both gauges of the addresses and leases read through reader (a
// cache) when scraped.
func NewPhaseCollector(reader client.Reader) prometheus.Collector {
	address := phasegauge.New(phasegauge.Opts{Name: MetricAddressPhase, Help: "The phase of a VirtualMachineIPAddress: 1 for its phase, 0 for the others.", Namespaced: true},
		AddressPhases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.VirtualMachineIPAddressPhase], error) {
			var list v1alpha2.VirtualMachineIPAddressList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.VirtualMachineIPAddressPhase], 0, len(list.Items))
			for i := range list.Items {
				v := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.VirtualMachineIPAddressPhase]{Namespace: v.Namespace, Name: v.Name, Phase: AddressPhase(v)})
			}
			return objects, nil
		})
	lease := phasegauge.New(phasegauge.Opts{Name: MetricLeasePhase, Help: "The phase of a VirtualMachineIPAddressLease: 1 for its phase, 0 for the others."},
		LeasePhases, func(ctx context.Context) ([]phasegauge.Object[v1alpha2.VirtualMachineIPAddressLeasePhase], error) {
			var list v1alpha2.VirtualMachineIPAddressLeaseList
			if err := reader.List(ctx, &list); err != nil {
				return nil, err
			}
			objects := make([]phasegauge.Object[v1alpha2.VirtualMachineIPAddressLeasePhase], 0, len(list.Items))
			for i := range list.Items {
				l := &list.Items[i]
				objects = append(objects, phasegauge.Object[v1alpha2.VirtualMachineIPAddressLeasePhase]{Name: l.Name, Phase: LeasePhase(l)})
			}
			return objects, nil
		})
	return phasegauge.Join(address, lease)
}

// AddressPhase is the phase of an address, Pending before it has one.
func AddressPhase(v *v1alpha2.VirtualMachineIPAddress) v1alpha2.VirtualMachineIPAddressPhase {
	if v.Status.Phase == "" {
		return v1alpha2.VirtualMachineIPAddressPhasePending
	}
	return v.Status.Phase
}

// LeasePhase is the phase of a lease; before its status is written, Bound while an address
// holds it and Released otherwise.
func LeasePhase(l *v1alpha2.VirtualMachineIPAddressLease) v1alpha2.VirtualMachineIPAddressLeasePhase {
	switch {
	case l.Status.Phase != "":
		return l.Status.Phase
	case l.Spec.VirtualMachineIPAddressRef != nil:
		return v1alpha2.VirtualMachineIPAddressLeasePhaseBound
	}
	return v1alpha2.VirtualMachineIPAddressLeasePhaseReleased
}
