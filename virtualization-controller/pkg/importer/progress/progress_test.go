package progress

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestProgress(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	p := New(c.now)
	steps := []struct {
		name    string
		advance time.Duration
		read    int
		total   int64
		done    bool
		want    Snapshot
	}{
		{name: "start, size unknown", want: Snapshot{}},
		{name: "1 MB in 1 s", advance: time.Second, read: 1e6, want: Snapshot{Read: 1e6, Speed: 1e6, AverageSpeed: 1e6}},
		{name: "size known", advance: time.Second, read: 1e6, total: 8e6, want: Snapshot{Read: 2e6, Total: 8e6, Ratio: 0.25, RatioKnown: true, Speed: 1e6, AverageSpeed: 1e6}},
		{name: "stall: the window forgets", advance: 10 * time.Second, read: 0, total: 8e6, want: Snapshot{Read: 2e6, Total: 8e6, Ratio: 0.25, RatioKnown: true, Speed: 0, AverageSpeed: 2e6 / 12.0}},
		{name: "burst", advance: 2 * time.Second, read: 4e6, total: 8e6, want: Snapshot{Read: 6e6, Total: 8e6, Ratio: 0.75, RatioKnown: true, Speed: 2e6, AverageSpeed: 6e6 / 14.0}},
		{name: "done", advance: time.Second, read: 2e6, total: 8e6, done: true, want: Snapshot{Read: 8e6, Total: 8e6, Ratio: 1, RatioKnown: true, Speed: 2e6, AverageSpeed: 8e6 / 15.0}},
	}
	for _, s := range steps {
		c.t = c.t.Add(s.advance)
		if s.read > 0 {
			if _, err := io.Copy(io.Discard, p.Reader(strings.NewReader(strings.Repeat("x", s.read)))); err != nil {
				t.Fatal(err)
			}
		}
		if s.total > 0 {
			p.SetTotal(s.total)
		}
		if s.done {
			p.Done()
		}
		if got := p.Snapshot(); got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}

func TestMetrics(t *testing.T) {
	c := &clock{time.Unix(1000, 0)}
	p := New(c.now)
	io.Copy(io.Discard, p.Reader(strings.NewReader(strings.Repeat("x", 500))))
	p.SetTotal(1000)
	c.t = c.t.Add(time.Second)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	want := `
# HELP d8_virtualization_importer_progress_ratio Share of the source read, 0 to 1; 1 when the import is done.
# TYPE d8_virtualization_importer_progress_ratio gauge
d8_virtualization_importer_progress_ratio 0.5
# HELP d8_virtualization_importer_read_bytes_total Bytes read from the source so far, as served (compressed).
# TYPE d8_virtualization_importer_read_bytes_total counter
d8_virtualization_importer_read_bytes_total 500
# HELP d8_virtualization_importer_source_size_bytes Size of the source as served, when known.
# TYPE d8_virtualization_importer_source_size_bytes gauge
d8_virtualization_importer_source_size_bytes 1000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"d8_virtualization_importer_progress_ratio", "d8_virtualization_importer_read_bytes_total", "d8_virtualization_importer_source_size_bytes"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 5 {
		t.Fatalf("%d series (%v), want 5", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
