package nodeagent

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusChangesCoalesce: changes of a pod's status that come close together are handed to
// the pod controller as one status (one write to the API), and a later change as another.
func TestStatusChangesCoalesce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent atomic.Int32
	p := &Provider{ctx: ctx, log: slog.New(slog.DiscardHandler), notify: func(*corev1.Pod) { sent.Add(1) }}
	r := newPodRuntime(p, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}})
	r.published = true
	go p.notifyLoop(r)
	// An init container exits, the next containers start, each one a change.
	for i := 0; i < 5; i++ {
		r.markDirty()
		time.Sleep(statusCoalesce / 20)
	}
	time.Sleep(3 * statusCoalesce)
	if n := sent.Load(); n != 1 {
		t.Fatalf("five changes within %s made %d statuses, want 1", statusCoalesce, n)
	}
	r.markDirty()
	time.Sleep(3 * statusCoalesce)
	if n := sent.Load(); n != 2 {
		t.Errorf("a change after the status settled made %d statuses in all, want 2", n)
	}
}
