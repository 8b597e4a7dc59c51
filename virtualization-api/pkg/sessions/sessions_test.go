package sessions

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var vmResource = schema.GroupResource{Group: "virtualization.deckhouse.io", Resource: "virtualmachines"}

// replicas are two registries, as two replicas of virtualization-api, on one cluster's Leases.
func replicas(t *testing.T) (*Registry, *Registry, *clocktesting.FakeClock, *fake.Clientset) {
	t.Helper()
	kube := fake.NewClientset()
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	cfg := Config{Leases: kube.CoordinationV1().Leases("d8-virtualization"), Clock: clock, Duration: 30 * time.Second, Resource: vmResource}
	a, b := cfg, cfg
	a.Identity, b.Identity = "virtualization-api-a", "virtualization-api-b"
	return New(a), New(b), clock, kube
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	a, b, clock, kube := replicas(t)
	vm := types.NamespacedName{Namespace: "ns", Name: "vm"}
	console := Key{VM: vm, Stream: "console"}
	vnc := Key{VM: vm, Stream: "vnc"}
	other := Key{VM: types.NamespacedName{Namespace: "other", Name: "vm"}, Stream: "console"}

	release, err := a.Acquire(ctx, console, "alice", "d8v/1.0")
	if err != nil {
		t.Fatal(err)
	}
	refused := `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": the console of the VirtualMachine is in use by "alice" (client "d8v/1.0") since 2026-12-01T10:00:00Z; one console session per VirtualMachine is allowed: GET .../virtualmachines/vm/console without an upgrade shows its holder`
	steps := []struct {
		name string
		r    *Registry
		key  Key
		user string
		msg  string // empty: granted
	}{
		{"second console on the other replica refused", b, console, "bob", refused},
		{"and on the same replica", a, console, "bob", refused},
		{"the holder too", a, console, "alice", refused},
		{"vnc is another slot", b, vnc, "bob", ""},
		{"same name, other namespace", b, other, "bob", ""},
	}
	for _, s := range steps {
		_, err := s.r.Acquire(ctx, s.key, s.user, "")
		if s.msg == "" {
			if err != nil {
				t.Errorf("%s: %v", s.name, err)
			}
			continue
		}
		if !apierrors.IsConflict(err) || err.Error() != s.msg {
			t.Errorf("%s: got %v\nwant %s", s.name, err, s.msg)
		}
	}
	for _, r := range []*Registry{a, b} {
		if h, ok, err := r.Current(ctx, console); err != nil || !ok || h != (Holder{User: "alice", Client: "d8v/1.0", Since: clock.Now()}) {
			t.Errorf("current seen by %s: %+v %v %v", r.Identity, h, ok, err)
		}
	}
	l, err := kube.CoordinationV1().Leases("d8-virtualization").Get(ctx, LeaseName(console), metav1.GetOptions{})
	if err != nil || l.Labels[LabelSession] != "console" || l.Annotations[AnnotationVM] != "ns/vm" || *l.Spec.LeaseDurationSeconds != 30 {
		t.Fatalf("the Lease %+v: %v", l, err)
	}

	// Renewed while open: still held long after its first duration.
	for i := 0; i < 9; i++ {
		clock.Step(10 * time.Second)
		waitRenewed(t, kube, console, clock.Now())
	}
	if _, ok, _ := b.Current(ctx, console); !ok {
		t.Error("a session renewed for 90s is no longer held")
	}

	release()
	release() // a second release frees nothing else
	if _, ok, _ := b.Current(ctx, console); ok {
		t.Error("released, still held")
	}
	if _, err := kube.CoordinationV1().Leases("d8-virtualization").Get(ctx, LeaseName(console), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the released Lease: %v", err)
	}
	if _, ok, _ := a.Current(ctx, vnc); !ok {
		t.Error("the release freed vnc")
	}
	if _, err := b.Acquire(ctx, console, "bob", ""); err != nil {
		t.Errorf("after release: %v", err)
	}
}

// A replica that died leaves its session's Lease behind, unrenewed: once it expired, another
// session takes it over.
func TestExpiredSessionIsTakenOver(t *testing.T) {
	ctx := context.Background()
	a, b, clock, kube := replicas(t)
	k := Key{VM: types.NamespacedName{Namespace: "ns", Name: "vm"}, Stream: "vnc"}
	dead := clock.Now().Add(-20 * time.Second)
	_, err := kube.CoordinationV1().Leases("d8-virtualization").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(k), Annotations: map[string]string{AnnotationUser: "carol"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("virtualization-api-gone/1"), LeaseDurationSeconds: ptr.To(int32(30)),
			AcquireTime: &metav1.MicroTime{Time: dead}, RenewTime: &metav1.MicroTime{Time: dead}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, k, "alice", ""); !apierrors.IsConflict(err) {
		t.Fatalf("a session renewed 20s ago: %v", err)
	}
	clock.Step(11 * time.Second)
	if _, ok, _ := a.Current(ctx, k); ok {
		t.Error("an expired session is shown as held")
	}
	release, err := b.Acquire(ctx, k, "alice", "")
	if err != nil {
		t.Fatalf("the expired session: %v", err)
	}
	defer release()
	if h, ok, _ := a.Current(ctx, k); !ok || h.User != "alice" {
		t.Errorf("after the takeover: %+v %v", h, ok)
	}
}

// waitRenewed waits until the Lease of k was renewed at now by its holder's renewal.
func waitRenewed(t *testing.T, kube *fake.Clientset, k Key, now time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := kube.CoordinationV1().Leases("d8-virtualization").Get(context.Background(), LeaseName(k), metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.Equal(now) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not renewed at %s: %+v %v", now, l, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
