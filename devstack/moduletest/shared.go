package moduletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/d8virt/devstack/prometheus"
	"io"
	"os"
	"os/exec"

	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/testenv"
)

// The environment `make test` hands over to every package, the way testenv.KubeconfigEnv hands
// over the base stack.
const (
	// SharedEnv names the record (a JSON file, Record) of a cluster with the module installed
	// that the e2e packages of one suite share; Installed takes it instead of starting one.
	SharedEnv = "D8V_TEST_MODULE"
	// BinEnv names a directory where Build has put the binaries already; Start takes them
	// instead of building its own.
	BinEnv = "D8V_TEST_MODULE_BIN"
)

// binaries are the programs the module's images stand for on the local stack, and the node agent.
var binaries = append(append([]string{}, module.ImagePackages...), "./devstack/cmd/node-agent", "./devstack/cmd/"+prometheus.SDDaemon)

// Build builds every binary a cluster runs (the module's images, the node agent, the cluster
// daemons) from the checkout at repo into dir.
func Build(ctx context.Context, repo, dir string) error {
	pkgs := append(append([]string{}, binaries...), testenv.ClusterDaemonPackages...)
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %w\n%s", err, out)
	}
	return nil
}

// Record is what a process that started a cluster tells another, so that it can use the
// cluster or stop it: everything Start chose.
type Record struct {
	StateDir     string   `json:"stateDir"`
	PortBase     int      `json:"portBase"`
	RewriterPort int      `json:"rewriterPort"`
	BinDir       string   `json:"binDir"`
	ImageStore   string   `json:"imageStore"`
	Nodes        []string `json:"nodes"`
	Repo         string   `json:"repo"`
	Set          []string `json:"set,omitempty"`
	// Dirs are the directories Start made, removed by Stop.
	Dirs []string `json:"dirs"`
}

// WriteRecord writes the cluster's record to path.
func (c *Cluster) WriteRecord(path string) error {
	b, err := json.MarshalIndent(c.rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load is the cluster of the record at path, as the process that started it has it: its Stop
// stops it. It starts nothing.
func Load(path string, n localnet.Net, log io.Writer) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r.cluster(n, log)
}

// Installed is a cluster with the module installed for a package whose tests leave the module
// as it is: the cluster SharedEnv hands over, whose Stop leaves it running for the next package,
// or else a private one (cfg), started and installed now, whose Stop removes it. A handed-over
// cluster has nodes and an image store of its own (Cluster.Nodes, Cluster.ImageStore): at least
// as many nodes as cfg asks for, not their names.
func Installed(ctx context.Context, cfg Config) (*Cluster, error) {
	if path := os.Getenv(SharedEnv); path != "" {
		c, err := Load(path, cfg.Net, cfg.Log)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", SharedEnv, path, err)
		}
		c.handedOver = true
		if len(c.Nodes) < len(cfg.Nodes) {
			return nil, fmt.Errorf("%s=%s: the cluster has the nodes %v, the tests need %d", SharedEnv, path, c.Nodes, len(cfg.Nodes))
		}
		if !c.Stack.Running() {
			return nil, fmt.Errorf("%s=%s: the cluster does not run (%v)", SharedEnv, path, c.Stack.Status())
		}
		// An earlier package may have broken it: better to know now than from a test's timeout.
		if err := module.WaitReady(ctx, c.Module, ReadyTimeout); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", SharedEnv, path, err)
		}
		return c, nil
	}
	c, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Install(ctx); err != nil {
		if cfg.Log != nil {
			c.Logs(cfg.Log)
		}
		return nil, errors.Join(fmt.Errorf("install the module: %w", err), c.Stop())
	}
	return c, nil
}
