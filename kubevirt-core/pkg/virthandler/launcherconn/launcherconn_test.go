package launcherconn

import (
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// TestOnce: a key is new once per connection; without a connection nothing is remembered.
func TestOnce(t *testing.T) {
	m := New(func(types.NamespacedName) {}, slog.Default())
	m.conns["pod-a"] = &conn{}
	for _, tc := range []struct {
		pod  types.UID
		key  string
		want bool
	}{
		{"pod-a", "Created", true},
		{"pod-a", "Created", false},
		{"pod-a", "ShuttingDown", true},
		{"pod-b", "Created", false},
	} {
		if got := m.Once(tc.pod, tc.key); got != tc.want {
			t.Errorf("Once(%s, %s) = %v, want %v", tc.pod, tc.key, got, tc.want)
		}
	}
}

// TestClientNeverConnects: Client hands out the connection there is and opens none.
func TestClientNeverConnects(t *testing.T) {
	m := New(func(types.NamespacedName) {}, slog.Default())
	c := &launcherapi.Client{}
	m.conns["pod-a"] = &conn{client: c}
	if got := m.Client("pod-a"); got != c {
		t.Errorf("Client(pod-a) = %p, want the connection's %p", got, c)
	}
	if got := m.Client("pod-b"); got != nil || len(m.conns) != 1 {
		t.Errorf("Client(pod-b) = %v with %d connections, want nil and no new one", got, len(m.conns))
	}
}
