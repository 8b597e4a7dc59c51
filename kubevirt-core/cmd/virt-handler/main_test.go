package main

import (
	"strings"
	"testing"
)

// TestRunRefusesBadOptions: run checks its options before it touches the cluster.
func TestRunRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"no node", options{vmiWorkers: 8}, "--node-name"},
		{"no workers", options{nodeName: "node1"}, "--vmi-workers 0 must be at least 1"},
		{"negative workers", options{nodeName: "node1", vmiWorkers: -2}, "--vmi-workers -2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := run(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
