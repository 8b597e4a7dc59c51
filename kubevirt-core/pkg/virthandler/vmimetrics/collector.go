package vmimetrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Instance is a VMI running on this node and the way to its launcher's statistics.
type Instance struct {
	Node, Namespace, Name string
	Stats                 func(context.Context) (*launcherapi.DomainStats, error)
}

// Lister lists the VMIs running on this node.
type Lister interface {
	Instances(context.Context) ([]Instance, error)
}

// Collector is a prometheus.Collector that gathers the VMIs' statistics on every scrape: one
// call per VMI, all at once, each bounded by the timeout, and all of them over when Collect
// returns, so nothing is left running for a VMI that went away.
type Collector struct {
	lister  Lister
	timeout time.Duration
	log     *slog.Logger
	descs   map[string]desc
}

// desc is a family's descriptor and type.
type desc struct {
	*prometheus.Desc
	kind prometheus.ValueType
}

var _ prometheus.Collector = &Collector{}

// New is a collector of the instances of lister, waiting at most timeout for each launcher.
func New(lister Lister, timeout time.Duration, log *slog.Logger) *Collector {
	c := &Collector{lister: lister, timeout: timeout, log: log, descs: map[string]desc{}}
	for _, f := range families {
		c.descs[f.name] = desc{prometheus.NewDesc(f.name, f.help, append(append([]string{}, vmiLabels...), f.labels...), nil), f.kind}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- c.descs[f.name].Desc
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	instances, err := c.lister.Instances(ctx)
	if err != nil {
		c.log.Warn("per-VMI metrics: list the VMIs", "err", err)
		return
	}
	stats := make([]*launcherapi.DomainStats, len(instances))
	var wg sync.WaitGroup
	for i, in := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := in.Stats(ctx)
			if err != nil {
				c.log.Warn("per-VMI metrics: no domain statistics", "vmi", in.Namespace+"/"+in.Name, "err", err)
				return
			}
			stats[i] = st
		}()
	}
	wg.Wait()
	for i, in := range instances {
		if stats[i] == nil {
			continue
		}
		for _, s := range Samples(*stats[i]) {
			labels := append([]string{in.Node, in.Namespace, in.Name}, s.Labels...)
			d := c.descs[s.Family]
			m, err := prometheus.NewConstMetric(d.Desc, d.kind, s.Value, labels...)
			if err != nil {
				c.log.Warn("per-VMI metrics: a sample", "vmi", in.Namespace+"/"+in.Name, "metric", s.Family, "err", err)
				continue
			}
			ch <- m
		}
	}
}
