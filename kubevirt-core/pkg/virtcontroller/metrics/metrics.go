// Package metrics exports virt-controller's view of the VMIs in KubeVirt's metric names, computed
// from the controller's cache at scrape time, so a scrape costs no API call and never goes stale.
package metrics

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const none = "<none>"

// Annotations KubeVirt's templates put on VMIs, which its phase metric breaks down by.
const (
	osAnnotation       = "vm.kubevirt.io/os"
	workloadAnnotation = "vm.kubevirt.io/workload"
	flavorAnnotation   = "vm.kubevirt.io/flavor"
)

var phaseCount = prometheus.NewDesc(
	"kubevirt_vmi_phase_count",
	"Sum of VMIs per phase and node.",
	[]string{"phase", "node", "os", "workload", "flavor", "instance_type", "preference"}, nil,
)

// VMICollector counts VMIs by phase and node from a cached reader.
type VMICollector struct {
	Reader client.Reader
}

var _ prometheus.Collector = &VMICollector{}

// Describe implements prometheus.Collector.
func (c *VMICollector) Describe(ch chan<- *prometheus.Desc) { ch <- phaseCount }

// Collect implements prometheus.Collector.
func (c *VMICollector) Collect(ch chan<- prometheus.Metric) {
	var list kubevirtv1.VirtualMachineInstanceList
	if err := c.Reader.List(context.Background(), &list); err != nil {
		ch <- prometheus.NewInvalidMetric(phaseCount, err)
		return
	}
	for key, n := range Count(list.Items) {
		ch <- prometheus.MustNewConstMetric(phaseCount, prometheus.GaugeValue, float64(n), key[:]...)
	}
}

// Count groups VMIs by the label values of kubevirt_vmi_phase_count, as KubeVirt does: phases in
// lower case, missing values as "<none>".
func Count(vmis []kubevirtv1.VirtualMachineInstance) map[[7]string]int {
	out := map[[7]string]int{}
	for i := range vmis {
		v := &vmis[i]
		phase := strings.ToLower(string(v.Status.Phase))
		if phase == "" {
			phase = strings.ToLower(string(kubevirtv1.Pending))
		}
		key := [7]string{
			phase, orNone(v.Status.NodeName),
			orNone(v.Annotations[osAnnotation]), orNone(v.Annotations[workloadAnnotation]), orNone(v.Annotations[flavorAnnotation]),
			orNone(v.Annotations[kubevirtv1.InstancetypeAnnotation]), orNone(v.Annotations[kubevirtv1.PreferenceAnnotation]),
		}
		out[key]++
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}
