// Package sessions holds the exclusive streams of virtual machines: at most one console and one
// VNC session per VM, across every replica of virtualization-api. Each open session is a
// coordination.k8s.io Lease in virtualization-api's namespace, renewed while the stream is open
// and deleted when it ends; a replica that dies leaves its Leases to expire, after which another
// session may take them. A second session is refused with an answer naming the holder, and a
// probe shows who holds it.
package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Key names one session slot: a VM and the stream (console, vnc).
type Key struct {
	VM     types.NamespacedName
	Stream string
}

// Holder is who holds a session.
type Holder struct {
	User   string
	Client string
	Since  time.Time
}

// The Lease of a session: labelled as one, its VM and holder in annotations (names and user
// names may be longer than label values).
const (
	LabelSession      = "virtualization.deckhouse.io/vm-session"
	AnnotationVM      = "virtualization.deckhouse.io/vm"
	AnnotationUser    = "virtualization.deckhouse.io/session-user"
	AnnotationClient  = "virtualization.deckhouse.io/session-client"
	DefaultDuration   = 30 * time.Second
	renewsPerDuration = 3
)

// Config is what a Registry is made of.
type Config struct {
	// Leases are virtualization-api's namespace's.
	Leases coordinationv1client.LeaseInterface
	// Identity names this replica (its Pod) in the Leases it holds.
	Identity string
	Clock    clock.WithTicker
	// Duration is how long a Lease outlives its last renewal (renewed three times as often):
	// how long the session of a replica that died keeps its slot.
	Duration time.Duration
	// Resource is what a refusal names (virtualmachines.virtualization.deckhouse.io).
	Resource schema.GroupResource
}

// Registry is the set of open sessions, kept in Leases.
type Registry struct{ Config }

// New makes a Registry.
func New(c Config) *Registry { return &Registry{Config: c} }

// LeaseName is the Lease of a slot: a DNS name from a hash of the VM's namespace and name.
func LeaseName(k Key) string {
	sum := sha256.Sum256([]byte(k.VM.Namespace + "/" + k.VM.Name))
	return "vm-" + k.Stream + "-" + hex.EncodeToString(sum[:10])
}

// Acquire takes the slot for user (client is its User-Agent). It returns the release, to be
// called once when the stream ends, or a 409 Conflict Status naming the holder and how to see
// it (a 503 when the Leases cannot be read or written).
func (r *Registry) Acquire(ctx context.Context, k Key, user, client string) (func(), error) {
	now := r.Clock.Now()
	want := r.lease(k, user, client, now)
	got, err := r.Leases.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *coordinationv1.Lease
		if cur, err = r.Leases.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return nil, unavailable(err)
		}
		if r.valid(cur, now) {
			return nil, r.refusal(k, holderOf(cur))
		}
		// Its holder is gone (a replica that died): take it over, unless another does first.
		cur.Labels, cur.Annotations, cur.Spec = want.Labels, want.Annotations, want.Spec
		got, err = r.Leases.Update(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil, r.refusal(k, Holder{User: "another session", Since: now})
		}
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return r.keep(got), nil
}

// keep renews the Lease until the release, which stops renewing and deletes it (unless another
// replica has taken it meanwhile: the delete is conditional on the last version written here).
func (r *Registry) keep(l *coordinationv1.Lease) func() {
	stop, done := make(chan struct{}), make(chan struct{})
	// The ticker starts with the session, not when the goroutine first runs.
	t := r.Clock.NewTicker(r.Duration / renewsPerDuration)
	go func() {
		defer close(done)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C():
			}
			next := l.DeepCopy()
			next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(r.Clock.Now()))
			ctx, cancel := context.WithTimeout(context.Background(), r.Duration/renewsPerDuration)
			got, err := r.Leases.Update(ctx, next, metav1.UpdateOptions{})
			cancel()
			switch {
			case err == nil:
				l = got
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				return // no longer ours: leave it to whoever has it
			}
			// Other errors: tried again at the next tick, the Lease not yet expired.
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			ctx, cancel := context.WithTimeout(context.Background(), r.Duration/renewsPerDuration)
			defer cancel()
			_ = r.Leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		})
	}
}

// Current is the slot's holder, if any.
func (r *Registry) Current(ctx context.Context, k Key) (Holder, bool, error) {
	l, err := r.Leases.Get(ctx, LeaseName(k), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Holder{}, false, nil
	case err != nil:
		return Holder{}, false, unavailable(err)
	case !r.valid(l, r.Clock.Now()):
		return Holder{}, false, nil
	}
	return holderOf(l), true, nil
}

// lease is the Lease of a new session of k.
func (r *Registry) lease(k Key, user, client string, now time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        LeaseName(k),
			Labels:      map[string]string{LabelSession: k.Stream},
			Annotations: map[string]string{AnnotationVM: k.VM.String(), AnnotationUser: user, AnnotationClient: client},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(r.Identity + "/" + sessionID()),
			LeaseDurationSeconds: ptr.To(int32(r.Duration / time.Second)),
			AcquireTime:          &t,
			RenewTime:            &t,
		},
	}
}

// valid: the Lease was renewed within its duration.
func (r *Registry) valid(l *coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

func holderOf(l *coordinationv1.Lease) Holder {
	h := Holder{User: l.Annotations[AnnotationUser], Client: l.Annotations[AnnotationClient]}
	if l.Spec.AcquireTime != nil {
		h.Since = l.Spec.AcquireTime.Time
	}
	return h
}

func (r *Registry) refusal(k Key, h Holder) error {
	return apierrors.NewConflict(r.Resource, k.VM.Name, fmt.Errorf(
		"the %s of the VirtualMachine is in use by %q (client %q) since %s; one %s session per VirtualMachine is allowed: GET .../virtualmachines/%s/%s without an upgrade shows its holder",
		k.Stream, h.User, h.Client, h.Since.UTC().Format(time.RFC3339), k.Stream, k.VM.Name, k.Stream))
}

func unavailable(err error) error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf("the sessions' Leases: %v", err))
}

// sessionID tells apart two sessions of one replica in a Lease's holder.
func sessionID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
