// Package kit holds the two defaults every virt-controller reconciler applies to its optional
// fields, so that each reconciler states only what is its own.
package kit

import (
	"time"

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
