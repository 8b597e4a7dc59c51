// Package progress counts the bytes an import reads from its source and serves them, with the
// ratio done and the download speed, as Prometheus metrics (contract.Metric*) for the controller
// to read while the importer runs.
package progress

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// speedWindow is how far back the current speed looks.
const speedWindow = 5 * time.Second

// Progress is a prometheus.Collector of one import's progress.
type Progress struct {
	now   func() time.Time
	start time.Time
	read  atomic.Int64
	total atomic.Int64 // 0: unknown
	done  atomic.Bool

	mu      sync.Mutex
	samples []sample // within speedWindow, oldest first
}

type sample struct {
	at   time.Time
	read int64
}

var (
	readDesc  = prometheus.NewDesc(contract.MetricReadBytes, "Bytes read from the source so far, as served (compressed).", nil, nil)
	sizeDesc  = prometheus.NewDesc(contract.MetricSourceSizeBytes, "Size of the source as served, when known.", nil, nil)
	ratioDesc = prometheus.NewDesc(contract.MetricProgressRatio, "Share of the source read, 0 to 1; 1 when the import is done.", nil, nil)
	speedDesc = prometheus.NewDesc(contract.MetricSpeedBytes, "Download speed over the last seconds.", nil, nil)
	avgDesc   = prometheus.NewDesc(contract.MetricAverageSpeedBytes, "Download speed since the import started.", nil, nil)
)

// New starts counting at now().
func New(now func() time.Time) *Progress {
	p := &Progress{now: now, start: now()}
	p.samples = []sample{{p.start, 0}}
	return p
}

// SetTotal records the source's size as served, once it is known.
func (p *Progress) SetTotal(n int64) { p.total.Store(n) }

// Done marks the import finished: the ratio is 1 from now on.
func (p *Progress) Done() { p.done.Store(true) }

// Reader counts what is read through r.
func (p *Progress) Reader(r io.Reader) io.Reader { return &counting{r: r, p: p} }

type counting struct {
	r io.Reader
	p *Progress
}

func (c *counting) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.read.Add(int64(n))
	return n, err
}

// Snapshot is the progress at one moment.
type Snapshot struct {
	Read, Total         int64 // Total 0: unknown
	Ratio               float64
	RatioKnown          bool
	Speed, AverageSpeed float64 // bytes per second
}

// Snapshot computes the figures now; it also records a sample for the current speed.
func (p *Progress) Snapshot() Snapshot {
	now, read, total := p.now(), p.read.Load(), p.total.Load()
	s := Snapshot{Read: read, Total: total}
	switch {
	case p.done.Load():
		s.Ratio, s.RatioKnown = 1, true
	case total > 0:
		s.Ratio, s.RatioKnown = min(float64(read)/float64(total), 1), true
	}
	if d := now.Sub(p.start).Seconds(); d > 0 {
		s.AverageSpeed = float64(read) / d
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, sample{now, read})
	// The oldest sample within the window is the baseline.
	for len(p.samples) > 1 && now.Sub(p.samples[0].at) > speedWindow {
		p.samples = p.samples[1:]
	}
	if first := p.samples[0]; now.After(first.at) {
		s.Speed = float64(read-first.read) / now.Sub(first.at).Seconds()
	}
	return s
}

// Describe implements prometheus.Collector.
func (p *Progress) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{readDesc, sizeDesc, ratioDesc, speedDesc, avgDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *Progress) Collect(ch chan<- prometheus.Metric) {
	s := p.Snapshot()
	ch <- prometheus.MustNewConstMetric(readDesc, prometheus.CounterValue, float64(s.Read))
	if s.Total > 0 {
		ch <- prometheus.MustNewConstMetric(sizeDesc, prometheus.GaugeValue, float64(s.Total))
	}
	if s.RatioKnown {
		ch <- prometheus.MustNewConstMetric(ratioDesc, prometheus.GaugeValue, s.Ratio)
	}
	ch <- prometheus.MustNewConstMetric(speedDesc, prometheus.GaugeValue, s.Speed)
	ch <- prometheus.MustNewConstMetric(avgDesc, prometheus.GaugeValue, s.AverageSpeed)
}
