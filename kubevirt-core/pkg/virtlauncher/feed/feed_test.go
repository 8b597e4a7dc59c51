package feed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func next(t *testing.T, w *Watcher[int]) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return w.Next(ctx)
}

// TestWatcher follows one watcher through the cases that matter to the launcher's Watch call.
func TestWatcher(t *testing.T) {
	tests := []struct {
		name string
		// run publishes and closes on f, given a watcher subscribed first (unless late).
		before, after func(f *Feed[int])
		want          []int
	}{
		{name: "current value at once", want: []int{0}},
		{name: "subscribing later sees the latest", before: func(f *Feed[int]) { f.Publish(1); f.Publish(2) }, want: []int{2}},
		{name: "a slow watcher skips to the latest", after: func(f *Feed[int]) { f.Publish(1); f.Publish(2); f.Publish(3) }, want: []int{3}},
		{name: "closing keeps the unread last value", after: func(f *Feed[int]) { f.Publish(7); f.Close() }, want: []int{7}},
		{name: "publish after close is dropped", after: func(f *Feed[int]) { f.Close(); f.Publish(9) }, want: []int{0}},
		{name: "watch after close gets the final value", before: func(f *Feed[int]) { f.Publish(5); f.Close() }, want: []int{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(0)
			if tt.before != nil {
				tt.before(f)
			}
			w := f.Watch()
			if tt.after != nil {
				tt.after(f)
			}
			for _, want := range tt.want {
				got, err := next(t, w)
				if err != nil || got != want {
					t.Fatalf("Next = %d, %v; want %d", got, err, want)
				}
			}
			f.Close()
			if got, err := next(t, w); !errors.Is(err, ErrClosed) {
				t.Fatalf("Next after the last value = %d, %v; want ErrClosed", got, err)
			}
		})
	}
}

// TestFanOut checks that every watcher sees the final value, that a watcher nobody reads does not
// hold up the publisher, and that a closed watcher is forgotten.
func TestFanOut(t *testing.T) {
	f := New(0)
	stuck := f.Watch() // never read
	gone := f.Watch()
	gone.Close()
	if len(f.watchers) != 1 {
		t.Fatalf("%d watchers registered, want 1 (a closed one must be dropped)", len(f.watchers))
	}

	const readers, last = 5, 1000
	var wg sync.WaitGroup
	seen := make([][]int, readers)
	for i := range readers {
		w := f.Watch()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close()
			for {
				v, err := w.Next(context.Background())
				if err != nil {
					return
				}
				seen[i] = append(seen[i], v)
				if v == last {
					return
				}
			}
		}()
	}
	published := make(chan struct{})
	go func() {
		for v := 1; v <= last; v++ {
			f.Publish(v)
		}
		close(published)
	}()
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a watcher")
	}
	wg.Wait()
	for i, vs := range seen {
		if len(vs) == 0 || vs[len(vs)-1] != last {
			t.Errorf("reader %d saw %v, want it to end with %d", i, vs, last)
		}
		for j := 1; j < len(vs); j++ {
			if vs[j] <= vs[j-1] {
				t.Errorf("reader %d saw values out of order: %v", i, vs)
				break
			}
		}
	}
	if v, err := next(t, stuck); err != nil || v != last {
		t.Errorf("unread watcher: Next = %d, %v; want only the latest, %d", v, err, last)
	}
}

func TestNextHonoursContext(t *testing.T) {
	w := New(0).Watch()
	if _, err := next(t, w); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing new = %v, want the context's error", err)
	}
}
