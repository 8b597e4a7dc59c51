// Package moduletest gives e2e tests a local stack with the module installed from the chart, as
// `make run` installs it: a control plane with Services, cluster DNS and the default
// StorageClass (testenv.AddClusterDaemons), local nodes (node agents) that run every Pod under
// its own ServiceAccount, a rewriter for people (kubectl speaking kubevirt.io), and `helm
// upgrade --install` of charts/virtualization with devstack/chart-values/local.yaml.
//
// Start starts a private stack without the module (Install puts it on; a test of the install
// itself wants that). Installed gives a package the module installed: the cluster `make test`
// started for every package to share (SharedEnv), or a private one when the package runs
// alone. The binaries the images stand for are built once per suite (BinEnv) or by Start.
package moduletest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/release"
	"github.com/d8virt/devstack/testenv"
)

// ReadyTimeout bounds the wait for the module after an install.
const ReadyTimeout = 5 * time.Minute

// Config says what to start.
type Config struct {
	// Repo is the repository root: the binaries are built from it, the chart is in it.
	Repo string
	// Net is the machine's local network (testenv.Env.Net).
	Net localnet.Net
	// Nodes are the local nodes; the module's pods and the VMs run on them.
	Nodes []string
	// ImageStore is the nodes' containerDisk store (the node agent's --image-store); empty, Start
	// makes one that Stop removes.
	ImageStore string
	// Set are more helm --set values for every install.
	Set []string
	// Log gets the stack's and the install's progress.
	Log io.Writer
}

// Cluster is a running stack with its nodes.
type Cluster struct {
	Stack *controlplane.Stack
	// Module is how Install installs the chart.
	Module module.Options
	// Kubevirt is a kubeconfig that talks kubevirt.io through a rewriter, as users of the core do.
	Kubevirt string
	Nodes    []string
	// ImageStore is the nodes' containerDisk store: a test imports the images its VMs boot
	// into it (nodeagent.ImportImage), under a reference of its own.
	ImageStore string
	rec        Record
	net        localnet.Net
	// handedOver is a cluster another process started and stops (SharedEnv): Stop leaves it.
	handedOver bool
}

// Start builds the binaries into a directory of its own (or takes those of BinEnv) and starts a
// private stack with the nodes and the users' rewriter. On an error, what did start is stopped
// again.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	rec := Record{ImageStore: cfg.ImageStore, Nodes: cfg.Nodes, Repo: cfg.Repo, Set: cfg.Set}
	defer func() {
		if err != nil {
			err = errors.Join(err, removeAll(rec.Dirs))
		}
	}()
	if rec.BinDir = os.Getenv(BinEnv); rec.BinDir == "" {
		if rec.BinDir, err = tempDir(&rec, "d8v-module-bin-"); err != nil {
			return nil, err
		}
		if err := Build(ctx, cfg.Repo, rec.BinDir); err != nil {
			return nil, err
		}
	}
	if rec.StateDir, err = tempDir(&rec, "d8v-module-stack-"); err != nil {
		return nil, err
	}
	if rec.ImageStore == "" {
		if rec.ImageStore, err = tempDir(&rec, "d8v-module-images-"); err != nil {
			return nil, err
		}
	}
	if rec.PortBase, rec.RewriterPort, err = freePorts(cfg.Net); err != nil {
		return nil, err
	}
	if c, err = rec.cluster(cfg.Net, cfg.Log); err != nil {
		return nil, err
	}
	if err := c.Stack.Up(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("stack: %w", err), c.Stop())
	}
	return c, nil
}

// freePorts finds a port base for the stack and another for the users' rewriter, apart.
func freePorts(n localnet.Net) (stack, rewriter int, err error) {
	if stack, err = testenv.FreePortBase(n); err != nil {
		return 0, 0, err
	}
	for {
		if rewriter, err = testenv.FreePortBase(n); err != nil || rewriter+6 <= stack || rewriter >= stack+6 {
			return stack, rewriter, err
		}
	}
}

func tempDir(rec *Record, pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err == nil {
		rec.Dirs = append(rec.Dirs, d)
	}
	return d, err
}

func removeAll(dirs []string) error {
	var err error
	for _, d := range dirs {
		err = errors.Join(err, os.RemoveAll(d))
	}
	return err
}

// cluster configures the stack the record describes: the control plane, the cluster daemons
// (Services, cluster DNS, the default StorageClass) before the nodes, since an agent learns the
// cluster DNS when it starts, a node agent per node, and the users' rewriter. It starts nothing.
func (r Record) cluster(n localnet.Net, log io.Writer) (*Cluster, error) {
	s, err := controlplane.New(controlplane.Config{StateDir: r.StateDir, BinDir: controlplane.BinDir(), PortBase: r.PortBase, Net: n})
	if err != nil {
		return nil, err
	}
	testenv.AddClusterDaemons(s, r.BinDir)
	for _, node := range r.Nodes {
		s.AddComponents(nodeAgent(s, r.BinDir, node, r.ImageStore))
	}
	c := &Cluster{Stack: s, Kubevirt: module.KubeconfigPath(s), Nodes: r.Nodes, ImageStore: r.ImageStore, rec: r, net: n}
	rw, err := module.UsersRewriter(s, r.BinDir, c.Kubevirt, r.RewriterPort)
	if err != nil {
		return nil, err
	}
	s.AddComponents(rw)
	c.Module = module.Options{Stack: s, Repo: r.Repo, BinDir: r.BinDir, Nodes: r.Nodes, Set: r.Set, Log: log}
	return c, nil
}

// NodeRoot is the state directory of a local node: its kubelet-like root with the pods.
func NodeRoot(s *controlplane.Stack, node string) string {
	return filepath.Join(s.Config().StateDir, "nodes", node)
}

func nodeAgent(s *controlplane.Stack, bin, name, store string) controlplane.Component {
	return controlplane.Component{
		Name: "node-agent-" + name,
		Bin:  filepath.Join(bin, "node-agent"),
		Args: []string{"--kubeconfig", s.KubeconfigPath(), "--node-name", name, "--root-dir", NodeRoot(s, name),
			"--bin-dir", bin, "--image-store", store, "--registry-config", module.RegistryConfigPath(s),
			"--cluster-dns", s.Config().ClusterDNSIP().String(), "--cluster-domain", controlplane.ClusterDomain},
		Ready: func(ctx context.Context) error {
			// The admin kubeconfig exists once the control plane is up, before any node.
			cfg, err := s.RESTConfig()
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("node %s is not Ready", name)
		},
	}
}

// Install runs helm upgrade --install with the cluster's values and more (set), waits until the
// module is ready, and configures the nodes for its DVCR (module.WriteNodeRegistryConfig), so
// they pull containerDisks from it as a platform's nodes do.
func (c *Cluster) Install(ctx context.Context, set ...string) error {
	o := c.Module
	o.Set = append(append([]string{}, o.Set...), set...)
	if err := module.Install(ctx, o); err != nil {
		return err
	}
	if err := module.WaitReady(ctx, o, ReadyTimeout); err != nil {
		return err
	}
	return module.WriteNodeRegistryConfig(ctx, o.Stack)
}

// InstallRelease installs an earlier release of the module (release.Prepare) the way its users
// did: helm upgrade --install of its chart with its values for the local stack and its images'
// tag, whose programs the nodes find in <bin>/<tag> (nodeagent.ResolveExecutable); it waits until
// the module is ready. A later Install upgrades to this checkout's chart.
func (c *Cluster) InstallRelease(ctx context.Context, tree release.Tree, set ...string) error {
	link := filepath.Join(c.Module.BinDir, tree.Version)
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Symlink(tree.Bin, link); err != nil {
		return err
	}
	o := c.Module
	o.Repo = tree.Src
	// A release before 0.2.0 mounts containerDisk images from the nodes' image store.
	o.Set = append(append(append([]string{}, o.Set...), "images.tag="+tree.Version, "containerDiskStore="+c.ImageStore), set...)
	if err := module.Install(ctx, o); err != nil {
		return fmt.Errorf("release %s: %w", tree.Version, err)
	}
	return module.WaitReady(ctx, o, ReadyTimeout)
}

// Stop stops the stack, removes its nodes' pods (processes, network namespaces, addresses),
// releases the volumes the pods used and removes every file. A cluster handed over by
// SharedEnv is left running: the process that started it stops it.
func (c *Cluster) Stop() error {
	if c.handedOver {
		return nil
	}
	err := c.Stack.Down(false)
	// A stopped agent leaves its pods running, as a kubelet does.
	for _, n := range c.Nodes {
		err = errors.Join(err, nodeagent.CleanupNode(NodeRoot(c.Stack, n), c.net, 30*time.Second))
	}
	// With no pod left, no volume is in use.
	err = errors.Join(err, testenv.ReleaseClusterDaemons(context.Background(), c.Stack))
	return errors.Join(err, removeAll(c.rec.Dirs))
}

// Logs writes the tail of every daemon's and Pod's log, which is what one needs to see why a
// component or a VM did not come up.
func (c *Cluster) Logs(w io.Writer) {
	var files []string
	for _, pattern := range []string{
		filepath.Join(c.Stack.Config().StateDir, "logs", "*.log"),
		filepath.Join(c.Stack.Config().StateDir, "nodes", "*", "pods", "*", "logs", "*.log"),
	} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		fmt.Fprintf(w, "==> %s <==\n%s\n", f, b)
	}
}
