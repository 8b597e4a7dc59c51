package importerprogress

import (
	"testing"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
)

func TestPercentAndSpeed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       Progress
		percent string
		ok      bool
		speed   v1alpha2.StatusSpeed
	}{
		{"known size", Progress{Ratio: 0.425, SpeedBytes: 18796544, AverageSpeedBytes: 1024}, "42.5%", true,
			v1alpha2.StatusSpeed{Avg: "1.0Ki/s", AvgBytes: "1024", Current: "17.9Mi/s", CurrentBytes: "18796544"}},
		{"unknown size", Progress{Ratio: -1}, "", false,
			v1alpha2.StatusSpeed{Avg: "0B/s", AvgBytes: "0", Current: "0B/s", CurrentBytes: "0"}},
	} {
		if percent, ok := tc.p.Percent(); percent != tc.percent || ok != tc.ok {
			t.Errorf("%s: Percent = %q, %v", tc.name, percent, ok)
		}
		if got := *tc.p.Speed(); got != tc.speed {
			t.Errorf("%s: Speed = %+v", tc.name, got)
		}
	}
}
