package dvcrgc

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestDue(t *testing.T) {
	for _, tc := range []struct {
		schedule    string
		last, since string
		want        string
	}{
		{"0 2 * * *", "", "2026-12-04T19:00:00Z", "2026-12-05T02:00:00Z"},
		{"0 2 * * *", "2026-12-04T02:00:00Z", "2026-12-04T19:00:00Z", "2026-12-05T02:00:00Z"},
		// Missed while the controller was down: due at once (before since).
		{"0 2 * * *", "2026-12-01T02:00:00Z", "2026-12-04T19:00:00Z", "2026-12-02T02:00:00Z"},
		{"@every 6h", "2026-12-04T10:00:00Z", "2026-12-04T19:00:00Z", "2026-12-04T16:00:00Z"},
		{"*/15 * * * *", "", "2026-12-04T19:01:00Z", "2026-12-04T19:15:00Z"},
	} {
		s, err := ParseSchedule(tc.schedule)
		if err != nil {
			t.Fatal(err)
		}
		var last time.Time
		if tc.last != "" {
			last = at(tc.last)
		}
		if got := Due(s, last, at(tc.since)); !got.Equal(at(tc.want)) {
			t.Errorf("%s after %q (since %s): %s, want %s", tc.schedule, tc.last, tc.since, got, tc.want)
		}
	}
}

func TestParseScheduleRefuses(t *testing.T) {
	for _, s := range []string{"", "0 2 * *", "61 * * * *", "@fortnightly", "* * * * * *"} {
		if _, err := ParseSchedule(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestLastRequested(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2026-12-04T02:00:00Z": at("2026-12-04T02:00:00Z"),
		"yesterday":            {},
		"":                     {},
	} {
		if got := LastRequested(map[string]string{AnnotationRequestedAt: in}); !got.Equal(want) {
			t.Errorf("%q: %s", in, got)
		}
	}
	if !LastRequested(nil).IsZero() {
		t.Error("no annotations")
	}
}

func TestBusy(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	got := Busy([]corev1.Pod{
		pod("running", corev1.PodRunning, false), pod("done", corev1.PodSucceeded, false),
		pod("failed", corev1.PodFailed, false), pod("pending", corev1.PodPending, false),
		pod("going", corev1.PodRunning, true),
	})
	if want := []string{"ns/pending", "ns/running"}; !slices.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
}
