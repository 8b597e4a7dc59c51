package importerprogress

import (
	"strconv"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/virtualization-controller/pkg/humansize"
)

// Percent is the ratio as status shows it (`42.5%`); ok is false while the source's size is
// unknown.
func (p Progress) Percent() (percent string, ok bool) {
	if p.Ratio < 0 {
		return "", false
	}
	return strconv.FormatFloat(100*p.Ratio, 'f', 1, 64) + "%", true
}

// Speed is the speeds as status shows them: `17.9Mi/s` and the bytes per second.
func (p Progress) Speed() *v1alpha2.StatusSpeed {
	return &v1alpha2.StatusSpeed{
		Avg: humansize.Format(int64(p.AverageSpeedBytes)) + "/s", AvgBytes: strconv.FormatInt(int64(p.AverageSpeedBytes), 10),
		Current: humansize.Format(int64(p.SpeedBytes)) + "/s", CurrentBytes: strconv.FormatInt(int64(p.SpeedBytes), 10),
	}
}
