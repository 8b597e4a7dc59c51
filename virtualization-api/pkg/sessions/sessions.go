// Package sessions holds the exclusive streams of virtual machines: at most one console and one
// VNC session per VM. A second one is refused with an answer naming the holder, and a probe
// shows who holds it. The state is this process's: virtualization-api runs as one replica (the
// chart's default) for the limit to be exact.
package sessions

import (
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

// Registry is the set of open sessions.
type Registry struct {
	now      func() time.Time
	resource schema.GroupResource
	mu       sync.Mutex
	held     map[Key]Holder
}

// New makes an empty registry. now is the clock of the holders' start times; resource is what
// a refusal names (virtualmachines.virtualization.deckhouse.io).
func New(now func() time.Time, resource schema.GroupResource) *Registry {
	return &Registry{now: now, resource: resource, held: map[Key]Holder{}}
}

// Acquire takes the slot for user (client is its User-Agent). It returns the release, to be
// called once when the stream ends, or a 409 Conflict Status naming the holder and how to see it.
func (r *Registry) Acquire(k Key, user, client string) (func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.held[k]; ok {
		return nil, apierrors.NewConflict(r.resource, k.VM.Name, fmt.Errorf(
			"the %s of the VirtualMachine is in use by %q (client %q) since %s; one %s session per VirtualMachine is allowed: GET .../virtualmachines/%s/%s without an upgrade shows its holder",
			k.Stream, h.User, h.Client, h.Since.UTC().Format(time.RFC3339), k.Stream, k.VM.Name, k.Stream))
	}
	r.held[k] = Holder{User: user, Client: client, Since: r.now()}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			delete(r.held, k)
		})
	}, nil
}

// Current is the slot's holder, if any.
func (r *Registry) Current(k Key) (Holder, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.held[k]
	return h, ok
}
