package dvcrgc

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func collector(t *testing.T, now string, objs ...client.Object) (*Collector, client.Client) {
	t.Helper()
	s, err := ParseSchedule("0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	return &Collector{
		Schedule: s, Deployment: types.NamespacedName{Namespace: "d8v", Name: "dvcr"},
		Reader: c, Pods: c, Selector: labels.SelectorFromSet(labels.Set{"managed": "yes"}), Writer: c,
		Clock: clocktesting.NewFakeClock(at(now)), Retry: time.Minute, Log: logr.Discard(), Requests: NewRequestsCounter(),
	}, c
}

func dvcr(last string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "d8v", Name: "dvcr"}}
	if last != "" {
		d.Spec.Template.Annotations = map[string]string{AnnotationRequestedAt: last, "checksum/config": "x"}
	}
	return d
}

func importer(phase corev1.PodPhase, managed string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "user", Name: "vd-importer-x", Labels: map[string]string{"managed": managed}},
		Status: corev1.PodStatus{Phase: phase}}
}

func requested(t *testing.T, c client.Client) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "d8v", Name: "dvcr"}, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Annotations[AnnotationRequestedAt]
}

// A collection not due yet waits until it is; one due restarts DVCR (the template's annotation,
// the others kept) and waits for the next; running imports hold it up for Retry, finished ones
// (and Pods of others) do not.
func TestStep(t *testing.T) {
	since := at("2026-12-04T19:00:00Z")
	for _, tc := range []struct {
		name, now, last string
		pod             *corev1.Pod
		wait            time.Duration
		restarted       bool
	}{
		{name: "not due", now: "2026-12-04T19:00:00Z", last: "2026-12-04T02:00:00Z", wait: 7 * time.Hour},
		{name: "never asked, not due", now: "2026-12-04T20:00:00Z", wait: 6 * time.Hour},
		{name: "due", now: "2026-12-05T02:00:30Z", last: "2026-12-04T02:00:00Z", wait: 24*time.Hour - 30*time.Second, restarted: true},
		{name: "missed while down", now: "2026-12-04T19:00:00Z", last: "2026-12-01T02:00:00Z", wait: 7 * time.Hour, restarted: true},
		{name: "due, an import runs", now: "2026-12-05T02:00:30Z", last: "2026-12-04T02:00:00Z", pod: importer(corev1.PodRunning, "yes"), wait: time.Minute},
		{name: "due, an import starts", now: "2026-12-05T02:00:30Z", last: "2026-12-04T02:00:00Z", pod: importer(corev1.PodPending, "yes"), wait: time.Minute},
		{name: "due, the import ended", now: "2026-12-05T02:00:30Z", last: "2026-12-04T02:00:00Z", pod: importer(corev1.PodSucceeded, "yes"), wait: 24*time.Hour - 30*time.Second, restarted: true},
		{name: "due, someone else's Pod runs", now: "2026-12-05T02:00:30Z", last: "2026-12-04T02:00:00Z", pod: importer(corev1.PodRunning, "no"), wait: 24*time.Hour - 30*time.Second, restarted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{dvcr(tc.last)}
			if tc.pod != nil {
				objs = append(objs, tc.pod)
			}
			col, c := collector(t, tc.now, objs...)
			wait, err := col.Step(context.Background(), since)
			if err != nil {
				t.Fatal(err)
			}
			if wait != tc.wait {
				t.Errorf("wait %s, want %s", wait, tc.wait)
			}
			got, want := requested(t, c), tc.last
			if tc.restarted {
				want = at(tc.now).Format(time.RFC3339)
			}
			if got != want {
				t.Errorf("requested at %q, want %q", got, want)
			}
			if n := testutil.ToFloat64(col.Requests); (n == 1) != tc.restarted {
				t.Errorf("%v requests counted", n)
			}
		})
	}
}

func TestStepWithoutDVCR(t *testing.T) {
	col, _ := collector(t, "2026-12-04T19:00:00Z")
	if _, err := col.Step(context.Background(), at("2026-12-04T19:00:00Z")); err == nil {
		t.Error("no error without DVCR's Deployment")
	}
}
