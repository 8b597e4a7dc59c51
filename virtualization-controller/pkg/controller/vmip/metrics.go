package vmip

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

// The phase gauges: one series per object and phase, 1 for the object's phase and 0 for the
// others, as kube-state-metrics' phase gauges.
const (
	MetricAddressPhase = "d8_virtualization_virtualmachineipaddress_status_phase"
	MetricLeasePhase   = "d8_virtualization_virtualmachineipaddresslease_status_phase"
)

// AddressPhases and LeasePhases are the phases a series exists for.
var (
	AddressPhases = []string{
		string(v1alpha2.VirtualMachineIPAddressPhasePending), string(v1alpha2.VirtualMachineIPAddressPhaseBound),
		string(v1alpha2.VirtualMachineIPAddressPhaseAttached),
	}
	LeasePhases = []string{
		string(v1alpha2.VirtualMachineIPAddressLeasePhaseBound), string(v1alpha2.VirtualMachineIPAddressLeasePhaseReleased),
	}
)

// PhaseCollector reports both gauges from a (cached) reader when scraped.
type PhaseCollector struct {
	reader  client.Reader
	address *prometheus.Desc
	lease   *prometheus.Desc
}

// NewPhaseCollector reads addresses and leases through reader.
func NewPhaseCollector(reader client.Reader) *PhaseCollector {
	return &PhaseCollector{
		reader: reader,
		address: prometheus.NewDesc(MetricAddressPhase, "The phase of a VirtualMachineIPAddress: 1 for its phase, 0 for the others.",
			[]string{"namespace", "name", "phase"}, nil),
		lease: prometheus.NewDesc(MetricLeasePhase, "The phase of a VirtualMachineIPAddressLease: 1 for its phase, 0 for the others.",
			[]string{"name", "phase"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *PhaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.address
	ch <- c.lease
}

// Collect implements prometheus.Collector.
func (c *PhaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var vmips v1alpha2.VirtualMachineIPAddressList
	if err := c.reader.List(ctx, &vmips); err != nil {
		ch <- prometheus.NewInvalidMetric(c.address, err)
	}
	for i := range vmips.Items {
		v := &vmips.Items[i]
		for phase, val := range PhaseValues(AddressPhases, string(AddressPhase(v))) {
			ch <- prometheus.MustNewConstMetric(c.address, prometheus.GaugeValue, val, v.Namespace, v.Name, phase)
		}
	}
	var leases v1alpha2.VirtualMachineIPAddressLeaseList
	if err := c.reader.List(ctx, &leases); err != nil {
		ch <- prometheus.NewInvalidMetric(c.lease, err)
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		for phase, val := range PhaseValues(LeasePhases, string(LeasePhase(l))) {
			ch <- prometheus.MustNewConstMetric(c.lease, prometheus.GaugeValue, val, l.Name, phase)
		}
	}
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

// PhaseValues is 1 for phase and 0 for every other of phases.
func PhaseValues(phases []string, phase string) map[string]float64 {
	m := make(map[string]float64, len(phases))
	for _, p := range phases {
		m[p] = 0
	}
	m[phase] = 1
	return m
}
