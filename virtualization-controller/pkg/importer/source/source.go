// Package source opens the stream an import reads: a file over HTTP(S), resumed across transient
// network errors, or the disk file of a container-disk image in a registry.
package source

import (
	"context"
	"io"
	"time"
)

// Stream is an open source.
type Stream struct {
	io.ReadCloser
	// Size is the length as served, -1 when unknown.
	Size int64
}

// Backoff is how transient failures are retried: Attempts tries in all, waiting Initial, then
// twice as long each time, at most Max.
type Backoff struct {
	Initial, Max time.Duration
	Attempts     int
}

func (b Backoff) delay(attempt int) time.Duration {
	d := b.Initial
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Sleep waits d or until ctx ends; it is injected so that tests do not wait.
type Sleep func(ctx context.Context, d time.Duration) error

// RealSleep is the Sleep of a running importer.
func RealSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
