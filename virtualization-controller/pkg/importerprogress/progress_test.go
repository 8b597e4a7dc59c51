package importerprogress

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

const running = `# HELP d8_virtualization_importer_progress_ratio read/size
# TYPE d8_virtualization_importer_progress_ratio gauge
d8_virtualization_importer_progress_ratio 0.452
# TYPE d8_virtualization_importer_speed_bytes_per_second gauge
d8_virtualization_importer_speed_bytes_per_second 1.048576e+06
# TYPE d8_virtualization_importer_average_speed_bytes_per_second gauge
d8_virtualization_importer_average_speed_bytes_per_second 2048
# TYPE d8_virtualization_importer_read_bytes_total counter
d8_virtualization_importer_read_bytes_total 4096
`

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    Progress
		wantErr bool
	}{
		{name: "running", in: running, want: Progress{Ratio: 0.452, ReadBytes: 4096, SpeedBytes: 1048576, AverageSpeedBytes: 2048}},
		{name: "size unknown", in: "# TYPE d8_virtualization_importer_speed_bytes_per_second gauge\nd8_virtualization_importer_speed_bytes_per_second 5\n", want: Progress{Ratio: -1, SpeedBytes: 5}},
		{name: "empty", in: "", want: Progress{Ratio: -1}},
		{name: "garbage", in: "not { metrics", wantErr: true},
		{name: "staged", in: running + "# TYPE d8_virtualization_importer_staged_unpacked_bytes gauge\nd8_virtualization_importer_staged_unpacked_bytes{cdrom=\"false\",format=\"qcow2\"} 2.62144e+07\n",
			want: Progress{Ratio: 0.452, ReadBytes: 4096, SpeedBytes: 1048576, AverageSpeedBytes: 2048, Staged: &Staged{UnpackedBytes: 26214400, Format: "qcow2"}}},
		{name: "an ISO staged", in: "d8_virtualization_importer_staged_unpacked_bytes{cdrom=\"true\",format=\"iso\"} 1024\n",
			want: Progress{Ratio: -1, Staged: &Staged{UnpackedBytes: 1024, Format: "iso", CDROM: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprint(w, running)
	}))
	defer srv.Close()
	s := NewScraper(&http.Client{Timeout: 5 * time.Second})
	p, err := s.Scrape(context.Background(), srv.URL+"/metrics")
	if err != nil || p.Ratio != 0.452 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := s.Scrape(context.Background(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("404: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(running)
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		_, _ = Parse(strings.NewReader(in)) // must not panic
	})
}
