// Package apimetrics instruments virt-api's two servers: the aggregated subresource API and the
// admission webhooks. Requests are labelled by route, never by object, so the series stay bounded
// however many VMs the cluster has.
package apimetrics

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// Metrics are virt-api's request and admission series.
type Metrics struct {
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	inflight  *prometheus.GaugeVec
	// Admissions counts webhook decisions by path and outcome ("allowed" or "denied").
	Admissions *prometheus.CounterVec
}

// New registers the series on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_virt_api_requests_total",
			Help: "Requests served by virt-api, by server, route, method and HTTP code.",
		}, []string{"server", "route", "method", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubevirt_virt_api_request_duration_seconds",
			Help: "Time to answer a request, by server and route; for console, vnc and portforward it is the session's length.",
			// Commands take milliseconds; streams last minutes.
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"server", "route"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubevirt_virt_api_requests_in_flight",
			Help: "Requests being served, including open console, vnc and portforward sessions.",
		}, []string{"server"}),
		Admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubevirt_virt_api_admission_reviews_total",
			Help: "Admission reviews answered, by webhook path and decision.",
		}, []string{"path", "decision"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.durations, m.inflight, m.Admissions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type routeKey struct{}

// Instrument wraps the handler of one server; route names a request's route from its URL path.
// promhttp's delegating writer keeps http.Hijacker and http.Flusher, which the WebSocket
// streams need.
func (m *Metrics) Instrument(server string, route func(path string) string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"server": server}
	fromCtx := promhttp.WithLabelFromCtx("route", func(ctx context.Context) string {
		r, _ := ctx.Value(routeKey{}).(string)
		return r
	})
	inner := promhttp.InstrumentHandlerInFlight(m.inflight.With(labels),
		promhttp.InstrumentHandlerDuration(m.durations.MustCurryWith(labels),
			promhttp.InstrumentHandlerCounter(m.requests.MustCurryWith(labels), h, fromCtx), fromCtx))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, route(r.URL.Path))))
	})
}

// SubresourceRoute names a subresources.kubevirt.io path (any served version) by what it acts on,
// e.g. "virtualmachines/start" or "virtualmachineinstances/portforward"; KubeVirt's routes the
// core does not serve count under their names too. The group's discovery is "discovery", the
// information routes "version", "guestfs" and "healthz", and anything else "other", so that
// made-up paths cannot grow the series.
func SubresourceRoute(path string) string {
	if path == "/healthz" {
		return "healthz"
	}
	rest, ok := strings.CutPrefix(path, "/apis/"+virtapicontract.SubresourcesGroup+"/")
	if !ok {
		return "other"
	}
	version, rest, _ := strings.Cut(rest, "/")
	if !slices.Contains(virtapicontract.SubresourcesVersions, version) {
		return "other"
	}
	// /namespaces/{ns}/{resource}/{name}/{subresource}[/...]
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "":
		return "discovery"
	case len(parts) == 1 && (parts[0] == "version" || parts[0] == "guestfs" || parts[0] == "healthz"):
		return parts[0]
	case len(parts) >= 5 && parts[0] == "namespaces" && slices.Contains(virtapicontract.KubeVirtSubresources[parts[2]], parts[4]):
		return parts[2] + "/" + parts[4]
	}
	return "other"
}

// WebhookRoute names a webhook path by itself when it is one of paths, "other" otherwise.
func WebhookRoute(paths ...string) func(string) string {
	known := map[string]bool{}
	for _, p := range paths {
		known[p] = true
	}
	return func(path string) string {
		if known[path] {
			return path
		}
		return "other"
	}
}
