package moduletest

import (
	"context"
	"strings"
	"testing"
)

// ForTest is Installed for one test: it fails the test when there is no cluster, and when the
// test ends it logs the components' logs of a failed test and stops the cluster (Stop leaves a
// handed-over one running). Register it before the test's own cleanups, which then run first.
func ForTest(t testing.TB, ctx context.Context, cfg Config) *Cluster {
	t.Helper()
	c, err := Installed(ctx, cfg)
	if err != nil {
		t.Fatalf("the cluster with the module: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			c.Logs(&b)
			t.Log(b.String())
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop the stack: %v", err)
		}
	})
	return c
}
