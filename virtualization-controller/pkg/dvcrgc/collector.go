package dvcrgc

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricRequests counts the collections asked for.
const MetricRequests = "d8_virtualization_dvcr_garbage_collections_requested_total"

// Collector asks for a collection whenever the schedule says so, as soon as no import runs. It is a
// manager.Runnable of the elected leader.
type Collector struct {
	Schedule cron.Schedule
	// Deployment is DVCR's, read without a cache.
	Deployment types.NamespacedName
	Reader     client.Reader
	// Pods lists the module's Pods (of Selector), which may hold up a collection.
	Pods     client.Reader
	Selector labels.Selector
	Writer   client.Writer
	Clock    clock.Clock
	// Retry is how long a collection held up by imports waits before it looks again.
	Retry    time.Duration
	Log      logr.Logger
	Requests prometheus.Counter
}

// NewRequestsCounter is the counter of MetricRequests.
func NewRequestsCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: MetricRequests, Help: "Garbage collections of DVCR's storage asked for: restarts of DVCR's pod, whose init container collects."})
}

// Start runs until ctx ends: each step says how long to wait for the next.
func (c *Collector) Start(ctx context.Context) error {
	since := c.Clock.Now()
	for {
		wait, err := c.Step(ctx, since)
		if err != nil {
			c.Log.Error(err, "DVCR garbage collection")
			wait = c.Retry
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.Clock.After(wait):
		}
	}
}

// NeedLeaderElection is true: one replica asks.
func (c *Collector) NeedLeaderElection() bool { return true }

// Step asks for a collection when one is due and no import runs, and returns how long to wait
// before the next step: until the next due time, or Retry while imports hold it up.
func (c *Collector) Step(ctx context.Context, since time.Time) (time.Duration, error) {
	dep := &appsv1.Deployment{}
	if err := c.Reader.Get(ctx, c.Deployment, dep); err != nil {
		return 0, fmt.Errorf("read DVCR's Deployment: %w", err)
	}
	now := c.Clock.Now()
	due := Due(c.Schedule, LastRequested(dep.Spec.Template.Annotations), since)
	if now.Before(due) {
		return due.Sub(now), nil
	}
	pods := &corev1.PodList{}
	if err := c.Pods.List(ctx, pods, client.MatchingLabelsSelector{Selector: c.Selector}); err != nil {
		return 0, fmt.Errorf("list the module's Pods: %w", err)
	}
	if busy := Busy(pods.Items); len(busy) > 0 {
		c.Log.Info("DVCR garbage collection due, waiting for imports to end", "due", due, "pods", strings.Join(busy, ", "))
		return c.Retry, nil
	}
	patch := client.MergeFrom(dep.DeepCopy())
	if dep.Spec.Template.Annotations == nil {
		dep.Spec.Template.Annotations = map[string]string{}
	}
	dep.Spec.Template.Annotations[AnnotationRequestedAt] = now.UTC().Format(time.RFC3339)
	if err := c.Writer.Patch(ctx, dep, patch); err != nil {
		return 0, fmt.Errorf("restart DVCR for its garbage collection: %w", err)
	}
	c.Requests.Inc()
	c.Log.Info("DVCR garbage collection asked for: DVCR's pod restarts and collects before its registries start", "due", due)
	next := c.Schedule.Next(now)
	return next.Sub(now), nil
}
