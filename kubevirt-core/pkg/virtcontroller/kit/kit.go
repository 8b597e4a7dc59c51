// Package kit holds the defaults every virt-controller reconciler applies to its optional
// fields, so that each reconciler states only what is its own.
package kit

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Now reads the optional clock of a reconciler; tests set one, production leaves it nil.
func Now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}

// Uncached is the reader that bypasses the informer cache, or the cached client when none is
// set (unit tests with a fake client).
func Uncached(apiReader client.Reader, cached client.Client) client.Reader {
	if apiReader != nil {
		return apiReader
	}
	return cached
}

// Event records an event about obj, as KubeVirt's controllers do for what they create and
// delete, when the reconciler has a recorder (unit tests leave it nil).
func Event(rec events.EventRecorder, obj runtime.Object, eventType, reason, action, note string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, nil, eventType, reason, action, note, args...)
	}
}
