// Package metrics defines the rewriter's Prometheus metrics. Each proxy gets its own registry, so
// that tests and in-process users can run several without colliding.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics of one rewriter, labelled by listener ("api", "webhook", "inprocess").
type Metrics struct {
	Registry *prometheus.Registry

	Requests      *prometheus.CounterVec
	Duration      *prometheus.HistogramVec
	Rewrites      *prometheus.CounterVec
	RewriteErrors *prometheus.CounterVec
	Bytes         *prometheus.CounterVec
	ActiveWatches *prometheus.GaugeVec
}

// New creates the metrics and registers them, with the Go and process collectors, in a fresh
// registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_api_rewriter_requests_total",
			Help: "Requests proxied, by listener, API resource, verb and HTTP status code.",
		}, []string{"listener", "resource", "verb", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kube_api_rewriter_request_duration_seconds",
			Help: "Time from receiving a request to the end of its response headers (watches: to the first byte), by listener and verb.",
			// Sub-millisecond buckets: the rewriter's own overhead is what this is for.
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"listener", "verb"}),
		Rewrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_api_rewriter_rewrites_total",
			Help: "Payloads rewritten, by kind of payload and direction (rename: to the cluster, restore: to the component).",
		}, []string{"payload", "direction"}),
		RewriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_api_rewriter_rewrite_errors_total",
			Help: "Payloads that could not be rewritten, by kind of payload and direction.",
		}, []string{"payload", "direction"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kube_api_rewriter_bytes_total",
			Help: "Body bytes through the proxy, by listener and direction (in: from the component, out: to the component).",
		}, []string{"listener", "direction"}),
		ActiveWatches: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kube_api_rewriter_active_watches",
			Help: "Watch streams open through the proxy, by listener and resource.",
		}, []string{"listener", "resource"}),
	}
	m.Registry.MustRegister(m.Requests, m.Duration, m.Rewrites, m.RewriteErrors, m.Bytes, m.ActiveWatches,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
