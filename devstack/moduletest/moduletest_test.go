package moduletest

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/svcproxy"
)

func record(t *testing.T, nodes ...string) Record {
	dir := t.TempDir()
	return Record{
		StateDir: filepath.Join(dir, "stack"), PortBase: 31000, RewriterPort: 31100, BinDir: filepath.Join(dir, "bin"),
		ImageStore: filepath.Join(dir, "images"), Nodes: nodes, Repo: dir, Set: []string{"logLevel=debug"},
		Dirs: []string{filepath.Join(dir, "stack"), filepath.Join(dir, "images")},
	}
}

// written writes the record of r's cluster, as the process that started it does, and returns
// its path.
func written(t *testing.T, r Record) string {
	t.Helper()
	c, err := r.cluster(localnet.Net{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.json")
	if err := c.WriteRecord(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A record written by the process that started a cluster gives another process the same
// cluster: the same daemons in the same order (Stop finds them by their records), nodes, image
// store and install options.
func TestRecordGivesTheSameCluster(t *testing.T) {
	for _, nodes := range [][]string{{"vd-node"}, {"node-a", "node-b"}} {
		t.Run(strings.Join(nodes, ","), func(t *testing.T) {
			r := record(t, nodes...)
			got, err := Load(written(t, r), localnet.Net{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.rec, r) {
				t.Errorf("record %+v, want %+v", got.rec, r)
			}
			want := []string{svcproxy.Daemon, provisioner.Daemon}
			for _, n := range nodes {
				want = append(want, "node-agent-"+n)
			}
			want = append(want, "rewriter-users")
			var names []string
			for _, comp := range got.Stack.Config().Components {
				names = append(names, comp.Name)
			}
			if !reflect.DeepEqual(names, want) {
				t.Errorf("components %v, want %v", names, want)
			}
			if got.Stack.Config().StateDir != r.StateDir || got.Stack.Config().PortBase != r.PortBase {
				t.Errorf("stack %s on %d, want %s on %d", got.Stack.Config().StateDir, got.Stack.Config().PortBase, r.StateDir, r.PortBase)
			}
			if !reflect.DeepEqual(got.Nodes, nodes) || got.ImageStore != r.ImageStore || got.Kubevirt != filepath.Join(r.StateDir, "kubevirt.kubeconfig") {
				t.Errorf("nodes %v, image store %s, kubevirt %s", got.Nodes, got.ImageStore, got.Kubevirt)
			}
			if o := got.Module; o.BinDir != r.BinDir || o.Repo != r.Repo || !reflect.DeepEqual(o.Set, r.Set) || !reflect.DeepEqual(o.Nodes, nodes) {
				t.Errorf("install options %+v", o)
			}
		})
	}
}

// A handed-over cluster that cannot serve the package is an error that says why, not a test
// that times out; and it is never stopped by the package.
func TestInstalledChecksTheHandedOverCluster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record []string
		want   []string
		err    string
	}{
		{"too few nodes", []string{"node-a"}, []string{"x", "y"}, "the tests need 2"},
		{"not running", []string{"node-a", "node-b"}, []string{"x"}, "the cluster does not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := written(t, record(t, tc.record...))
			t.Setenv(SharedEnv, path)
			_, err := Installed(context.Background(), Config{Nodes: tc.want})
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Installed: %v, want an error naming %s with %q", err, path, tc.err)
			}
		})
	}
	t.Run("missing record", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.json")
		t.Setenv(SharedEnv, path)
		if _, err := Installed(context.Background(), Config{}); err == nil || !strings.Contains(err.Error(), SharedEnv) {
			t.Fatalf("Installed: %v, want an error naming %s", err, SharedEnv)
		}
	})
}

// A handed-over cluster's Stop leaves it running and its files in place.
func TestStopLeavesAHandedOverCluster(t *testing.T) {
	r := record(t, "node-a")
	c, err := r.cluster(localnet.Net{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.handedOver = true
	mark := filepath.Join(r.StateDir, "admin.kubeconfig")
	if err := os.MkdirAll(r.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("Stop of a handed-over cluster removed its files: %v", err)
	}
}
