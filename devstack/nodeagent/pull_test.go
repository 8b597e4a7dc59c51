package nodeagent

import (
	"testing"
	"time"
)

func TestPullBackoff(t *testing.T) {
	for _, c := range []struct {
		failures int
		want     time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {6, 5 * time.Minute}, {50, 5 * time.Minute}} {
		if got := pullBackoff(10*time.Second, 5*time.Minute, c.failures); got != c.want {
			t.Errorf("pullBackoff after %d failures = %s, want %s", c.failures, got, c.want)
		}
	}
}
