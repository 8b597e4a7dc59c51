package launcherconn

import (
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/types"
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
