package sessions

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestSessions(t *testing.T) {
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r := New(func() time.Time { return clock }, schema.GroupResource{Group: "virtualization.deckhouse.io", Resource: "virtualmachines"})
	vm := types.NamespacedName{Namespace: "ns", Name: "vm"}
	console := Key{VM: vm, Stream: "console"}
	vnc := Key{VM: vm, Stream: "vnc"}
	other := Key{VM: types.NamespacedName{Namespace: "other", Name: "vm"}, Stream: "console"}

	release, err := r.Acquire(console, "alice", "d8v/1.0")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		key  Key
		user string
		msg  string // empty: granted
	}{
		{"second console refused", console, "bob", `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": the console of the VirtualMachine is in use by "alice" (client "d8v/1.0") since 2026-12-01T10:00:00Z; one console session per VirtualMachine is allowed: GET .../virtualmachines/vm/console without an upgrade shows its holder`},
		{"the holder too", console, "alice", `Operation cannot be fulfilled on virtualmachines.virtualization.deckhouse.io "vm": the console of the VirtualMachine is in use by "alice" (client "d8v/1.0") since 2026-12-01T10:00:00Z; one console session per VirtualMachine is allowed: GET .../virtualmachines/vm/console without an upgrade shows its holder`},
		{"vnc is another slot", vnc, "bob", ""},
		{"same name, other namespace", other, "bob", ""},
	}
	for _, s := range steps {
		_, err := r.Acquire(s.key, s.user, "")
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
	if h, ok := r.Current(console); !ok || h != (Holder{User: "alice", Client: "d8v/1.0", Since: clock}) {
		t.Errorf("current: %+v %v", h, ok)
	}
	release()
	release() // a second release frees nothing else
	if _, ok := r.Current(console); ok {
		t.Error("released, still held")
	}
	if _, ok := r.Current(vnc); !ok {
		t.Error("the second release freed vnc")
	}
	if _, err := r.Acquire(console, "bob", ""); err != nil {
		t.Errorf("after release: %v", err)
	}
}
