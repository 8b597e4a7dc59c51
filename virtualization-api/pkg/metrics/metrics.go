// Package metrics are virtualization-api's Prometheus metrics: requests by subresource, verb
// and code, open streams, and bytes streamed.
package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collectors, registered in the registry they were made with.
type Metrics struct {
	requests *prometheus.CounterVec
	open     *prometheus.GaugeVec
	bytes    *prometheus.CounterVec
}

// New registers the metrics in reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "d8_virtualization_api_requests_total",
			Help: "Requests to the VirtualMachine subresources, by subresource, verb (RBAC) and HTTP status code; a stream counts when it opens (101) or is refused.",
		}, []string{"subresource", "verb", "code"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "d8_virtualization_api_open_streams",
			Help: "Streams (console, vnc, portforward) open now.",
		}, []string{"subresource"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "d8_virtualization_api_streamed_bytes_total",
			Help: "Payload bytes relayed by streams, by subresource and direction (to_guest, to_client).",
		}, []string{"subresource", "direction"}),
	}
	reg.MustRegister(m.requests, m.open, m.bytes)
	return m
}

// Request counts one request.
func (m *Metrics) Request(subresource, verb string, code int) {
	m.requests.WithLabelValues(subresource, verb, strconv.Itoa(code)).Inc()
}

// StreamOpened counts an open stream; the returned func counts it closed.
func (m *Metrics) StreamOpened(subresource string) func() {
	g := m.open.WithLabelValues(subresource)
	g.Inc()
	return g.Dec
}

// Bytes counts n bytes relayed in direction.
func (m *Metrics) Bytes(subresource, direction string, n int) {
	m.bytes.WithLabelValues(subresource, direction).Add(float64(n))
}
