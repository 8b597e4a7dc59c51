// Package dvcrgc has DVCR's storage garbage-collected on a schedule. The chart's DVCR pod runs the
// registry's garbage collection in an init container, before its registries start, so that no
// push is cut in half by it; a collection is therefore a restart of that pod, which the collector
// asks for by stamping DVCR's pod template, when the schedule says so and no import is running.
package dvcrgc

import (
	"sort"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
)

// AnnotationRequestedAt, on DVCR's pod template, is when the last collection was asked for (RFC
// 3339, UTC). Changing it rolls the pod.
const AnnotationRequestedAt = "virtualization.deckhouse.io/dvcr-gc-requested-at"

// ParseSchedule reads a schedule: a cron expression in UTC (minute hour day-of-month month
// day-of-week) or a descriptor (@daily, @hourly, @every 6h).
func ParseSchedule(s string) (cron.Schedule, error) {
	return cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(s)
}

// Due is when the next collection is due: the schedule's first time after the last one asked for,
// or, when none ever was, after since (when the collector started).
func Due(s cron.Schedule, last, since time.Time) time.Time {
	if last.IsZero() {
		last = since
	}
	return s.Next(last)
}

// LastRequested reads AnnotationRequestedAt from DVCR's pod template annotations; zero when it
// is missing or unreadable.
func LastRequested(annotations map[string]string) time.Time {
	t, err := time.Parse(time.RFC3339, annotations[AnnotationRequestedAt])
	if err != nil {
		return time.Time{}
	}
	return t
}

// Busy names the Pods among pods whose work a restart of DVCR would cut: those not finished
// (importers, uploaders, fillers, exporters and inspectors read or write DVCR), as namespace/name.
func Busy(pods []corev1.Pod) []string {
	var busy []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			busy = append(busy, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(busy)
	return busy
}
