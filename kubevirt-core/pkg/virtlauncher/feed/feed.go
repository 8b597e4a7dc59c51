// Package feed fans one changing value (the launcher's domain status) out to any number of
// watchers. The publisher never waits for a watcher: each watcher holds only the latest value it
// has not read yet, so a slow one skips intermediate values instead of stalling the domain loop
// or growing a queue.
package feed

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is what Next returns once the feed is closed and the watcher has read the last value.
var ErrClosed = errors.New("feed closed")

// Feed holds the current value and its watchers. Published values are shared with every watcher
// and must not be modified afterwards.
type Feed[T any] struct {
	mu       sync.Mutex
	current  T
	closed   bool
	watchers map[*Watcher[T]]struct{}
}

// New returns a feed whose current value is initial.
func New[T any](initial T) *Feed[T] {
	return &Feed[T]{current: initial, watchers: map[*Watcher[T]]struct{}{}}
}

// Current is the latest published value.
func (f *Feed[T]) Current() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current
}

// Publish makes v the current value and hands it to every watcher, replacing any value a watcher
// has not read yet. It never blocks. Publishing on a closed feed does nothing: the last value
// before Close is final.
func (f *Feed[T]) Publish(v T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.current = v
	for w := range f.watchers {
		w.offer(v)
	}
}

// Close ends the feed: watchers still get the value they have not read, then ErrClosed.
func (f *Feed[T]) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed = true
	for w := range f.watchers {
		w.end()
	}
}

// Watch subscribes to the feed. The first Next returns the current value at once.
func (f *Feed[T]) Watch() *Watcher[T] {
	w := &Watcher[T]{feed: f, signal: make(chan struct{}, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.offer(f.current)
	if f.closed {
		w.end()
	} else {
		f.watchers[w] = struct{}{}
	}
	return w
}

// Watcher receives the values of a feed, latest first, skipping those it was too slow to read.
type Watcher[T any] struct {
	feed *Feed[T]
	// signal has room for one token: set when pending or ended changed, so Next wakes up.
	signal chan struct{}

	mu      sync.Mutex
	pending T
	has     bool
	ended   bool
}

func (w *Watcher[T]) offer(v T) {
	w.mu.Lock()
	w.pending, w.has = v, true
	w.mu.Unlock()
	w.wake()
}

func (w *Watcher[T]) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	w.wake()
}

func (w *Watcher[T]) wake() {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// Next returns the latest value not yet read, waiting for one if needed. It fails with ErrClosed
// after the feed (or this watcher) is closed and the last value was read, or with ctx's error.
func (w *Watcher[T]) Next(ctx context.Context) (T, error) {
	for {
		w.mu.Lock()
		if w.has {
			v := w.pending
			var zero T
			w.pending, w.has = zero, false
			w.mu.Unlock()
			return v, nil
		}
		ended := w.ended
		w.mu.Unlock()
		if ended {
			var zero T
			return zero, ErrClosed
		}
		select {
		case <-w.signal:
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}

// Close unsubscribes the watcher; a Next in progress returns what is pending, then ErrClosed.
func (w *Watcher[T]) Close() {
	w.feed.mu.Lock()
	delete(w.feed.watchers, w)
	w.feed.mu.Unlock()
	w.end()
}
