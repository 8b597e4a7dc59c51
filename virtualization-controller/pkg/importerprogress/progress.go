// Package importerprogress reads a running importer's progress from its metrics endpoint
// (the metrics named in the importer's contract).
package importerprogress

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// Progress is what an importer reports while it runs. Ratio is negative while the source's size
// is unknown; ReadBytes is what it has read of the source (0 while an upload has not begun).
type Progress struct {
	Ratio             float64
	ReadBytes         float64
	SpeedBytes        float64
	AverageSpeedBytes float64
	// Staged is the disk a staging importer (contract.FlagThenExport) holds and serves; nil
	// until it does.
	Staged *Staged
}

// Staged is a staged disk: its unpacked size, the source's format, and whether it is an ISO.
type Staged struct {
	UnpackedBytes int64
	Format        string
	CDROM         bool
}

// maxBody bounds what is read of an importer's answer: its few metrics are a few KiB.
const maxBody = 1 << 20

// Parse reads Prometheus text exposition as the importer serves it.
func Parse(r io.Reader) (Progress, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(r, maxBody))
	if err != nil {
		return Progress{}, fmt.Errorf("importer metrics: %w", err)
	}
	value := func(name string) (float64, bool) {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			return 0, false
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		}
		return 0, false
	}
	p := Progress{Ratio: -1}
	if v, ok := value(contract.MetricProgressRatio); ok {
		p.Ratio = v
	}
	p.ReadBytes, _ = value(contract.MetricReadBytes)
	p.SpeedBytes, _ = value(contract.MetricSpeedBytes)
	p.AverageSpeedBytes, _ = value(contract.MetricAverageSpeedBytes)
	if v, ok := value(contract.MetricStagedBytes); ok {
		p.Staged = &Staged{UnpackedBytes: int64(v)}
		for _, l := range families[contract.MetricStagedBytes].GetMetric()[0].GetLabel() {
			switch l.GetName() {
			case contract.LabelFormat:
				p.Staged.Format = l.GetValue()
			case contract.LabelCDROM:
				p.Staged.CDROM = l.GetValue() == "true"
			}
		}
	}
	return p, nil
}

// Scraper reads progress over HTTP.
type Scraper struct {
	client *http.Client
}

// NewScraper reads through client (with its timeout).
func NewScraper(client *http.Client) *Scraper { return &Scraper{client: client} }

// Scrape reads the progress of the importer whose metrics are at url.
func (s *Scraper) Scrape(ctx context.Context, url string) (Progress, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Progress{}, fmt.Errorf("importer metrics request: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Progress{}, fmt.Errorf("importer metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return Progress{}, fmt.Errorf("importer metrics %s: HTTP %s", url, resp.Status)
	}
	return Parse(resp.Body)
}
