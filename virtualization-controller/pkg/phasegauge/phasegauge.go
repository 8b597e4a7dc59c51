// Package phasegauge is a kube-state-metrics-style phase gauge: one series per object and phase,
// 1 for the object's phase and 0 for the others.
package phasegauge

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// listTimeout bounds one scrape's listing.
const listTimeout = 10 * time.Second

// Object is one object's phase; Namespace is empty for a cluster-scoped kind.
type Object[P ~string] struct {
	Namespace, Name string
	Phase           P
}

// ListFunc lists the objects' phases, read when scraped (from a cache, usually).
type ListFunc[P ~string] func(ctx context.Context) ([]Object[P], error)

// Opts name the gauge.
type Opts struct {
	Name, Help string
	// Namespaced adds the label namespace to name and phase.
	Namespaced bool
}

// Gauge is the prometheus.Collector of one phase gauge.
type Gauge[P ~string] struct {
	desc       *prometheus.Desc
	namespaced bool
	phases     []P
	list       ListFunc[P]
}

// New makes the gauge of opts with a series for each of phases per object that list returns.
func New[P ~string](opts Opts, phases []P, list ListFunc[P]) *Gauge[P] {
	labels := []string{"name", "phase"}
	if opts.Namespaced {
		labels = []string{"namespace", "name", "phase"}
	}
	return &Gauge[P]{desc: prometheus.NewDesc(opts.Name, opts.Help, labels, nil), namespaced: opts.Namespaced, phases: phases, list: list}
}

// Describe implements prometheus.Collector.
func (g *Gauge[P]) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

// Collect implements prometheus.Collector.
func (g *Gauge[P]) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
	defer cancel()
	objects, err := g.list(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(g.desc, fmt.Errorf("list: %w", err))
		return
	}
	for _, o := range objects {
		for phase, v := range Values(g.phases, o.Phase) {
			labels := []string{o.Name, string(phase)}
			if g.namespaced {
				labels = append([]string{o.Namespace}, labels...)
			}
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, labels...)
		}
	}
}

// Values is 1 for phase and 0 for every other of phases.
func Values[P ~string](phases []P, phase P) map[P]float64 {
	m := make(map[P]float64, len(phases))
	for _, p := range phases {
		m[p] = 0
	}
	m[phase] = 1
	return m
}

// Join is one collector of several, e.g. the gauges one controller reports.
func Join(cs ...prometheus.Collector) prometheus.Collector { return collectors(cs) }

type collectors []prometheus.Collector

// Describe implements prometheus.Collector.
func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
