// Package moduletest gives e2e tests a private local stack with the module installed from the
// chart, as `make run` installs it: a control plane with Services, cluster DNS and the default
// StorageClass (testenv.AddClusterDaemons), local nodes (node agents) that run every Pod
// under its own ServiceAccount, a rewriter for people (kubectl speaking kubevirt.io), and
// `helm upgrade --install` of charts/virtualization with devstack/chart-values/local.yaml. The
// stack starts without the module; Install puts it on. Stop removes everything.
package moduletest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/testenv"
)

// ReadyTimeout bounds the wait for the module after an install.
const ReadyTimeout = 5 * time.Minute

// binaries are the programs the module's images stand for on the local stack, and the node agent.
var binaries = []string{
	"./kube-api-rewriter/cmd/kube-api-rewriter", "./kubevirt-core/cmd/virt-operator", "./kubevirt-core/cmd/virt-api",
	"./kubevirt-core/cmd/virt-controller", "./kubevirt-core/cmd/virt-handler", "./kubevirt-core/cmd/virt-launcher", "./kubevirt-core/cmd/container-disk",
	"./virtualization-controller/cmd/virtualization-controller", "./virtualization-controller/cmd/importer",
	"./virtualization-api/cmd/virtualization-api",
	"./devstack/cmd/node-agent",
}

// Config says what to start.
type Config struct {
	// Repo is the repository root: the binaries are built from it, the chart is in it.
	Repo string
	// Net is the machine's local network (testenv.Env.Net).
	Net localnet.Net
	// Nodes are the local nodes; the module's pods and the VMs run on them.
	Nodes []string
	// ImageStore is the nodes' containerDisk store (the node agent's --image-store).
	ImageStore string
	// Set are more helm --set values for every install.
	Set []string
	// Log gets the stack's and the install's progress.
	Log io.Writer
}

// Cluster is a running private stack with its nodes.
type Cluster struct {
	Stack *controlplane.Stack
	// Module is how Install installs the chart.
	Module module.Options
	// Kubevirt is a kubeconfig that talks kubevirt.io through a rewriter, as users of the core do.
	Kubevirt string
	Nodes    []string
	net      localnet.Net
	dirs     []string
}

// Start builds the binaries into a directory of its own and starts the stack with the nodes and
// the users' rewriter. On an error, what did start is stopped again.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	c = &Cluster{Nodes: cfg.Nodes, net: cfg.Net}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
			c = nil
		}
	}()
	bin, err := c.tempDir("d8v-module-bin-")
	if err != nil {
		return c, err
	}
	pkgs := append(append([]string{}, binaries...), testenv.ClusterDaemonPackages...)
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-o", bin + "/"}, pkgs...)...)
	build.Dir = cfg.Repo
	if out, err := build.CombinedOutput(); err != nil {
		return c, fmt.Errorf("build: %w\n%s", err, out)
	}
	state, err := c.tempDir("d8v-module-stack-")
	if err != nil {
		return c, err
	}
	base, err := testenv.FreePortBase(cfg.Net)
	if err != nil {
		return c, err
	}
	s, err := controlplane.New(controlplane.Config{StateDir: state, BinDir: controlplane.BinDir(), PortBase: base, Net: cfg.Net})
	if err != nil {
		return c, err
	}
	c.Stack = s
	// Services, cluster DNS and the default StorageClass come with the control plane, before the
	// nodes: an agent learns the cluster DNS when it starts.
	testenv.AddClusterDaemons(s, bin)
	if err := s.Up(ctx); err != nil {
		return c, fmt.Errorf("control plane: %w", err)
	}
	kubeCfg, err := s.RESTConfig()
	if err != nil {
		return c, err
	}
	kube, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return c, err
	}
	rwPort, err := testenv.FreePortBase(cfg.Net)
	if err != nil {
		return c, err
	}
	c.Kubevirt = module.KubeconfigPath(s)
	rw, err := module.UsersRewriter(s, bin, c.Kubevirt, rwPort)
	if err != nil {
		return c, err
	}
	for _, n := range cfg.Nodes {
		s.AddComponents(nodeAgent(s, kube, bin, n, cfg.ImageStore))
	}
	s.AddComponents(rw)
	if err := s.Up(ctx); err != nil {
		return c, fmt.Errorf("nodes and rewriter: %w", err)
	}
	c.Module = module.Options{Stack: s, Repo: cfg.Repo, BinDir: bin, Nodes: cfg.Nodes, Set: cfg.Set, Log: cfg.Log}
	return c, nil
}

func (c *Cluster) tempDir(pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err == nil {
		c.dirs = append(c.dirs, d)
	}
	return d, err
}

// NodeRoot is the state directory of a local node: its kubelet-like root with the pods.
func NodeRoot(s *controlplane.Stack, node string) string {
	return filepath.Join(s.Config().StateDir, "nodes", node)
}

func nodeAgent(s *controlplane.Stack, kube kubernetes.Interface, bin, name, store string) controlplane.Component {
	return controlplane.Component{
		Name: "node-agent-" + name,
		Bin:  filepath.Join(bin, "node-agent"),
		Args: []string{"--kubeconfig", s.KubeconfigPath(), "--node-name", name, "--root-dir", NodeRoot(s, name),
			"--bin-dir", bin, "--image-store", store, "--registry-config", module.RegistryConfigPath(s),
			"--cluster-dns", s.Config().ClusterDNSIP().String(), "--cluster-domain", controlplane.ClusterDomain},
		Ready: func(ctx context.Context) error {
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

// Install runs helm upgrade --install with the cluster's values and more (set), and waits until
// the module is ready.
func (c *Cluster) Install(ctx context.Context, set ...string) error {
	o := c.Module
	o.Set = append(append([]string{}, o.Set...), set...)
	if err := module.Install(ctx, o); err != nil {
		return err
	}
	if err := module.WaitReady(ctx, o, ReadyTimeout); err != nil {
		return err
	}
	// The nodes pull containerDisks from DVCR as a platform's nodes do.
	return module.WriteNodeRegistryConfig(ctx, o.Stack)
}

// Stop stops the stack, removes its nodes' pods (processes, network namespaces, addresses),
// releases the volumes the pods used and removes every file.
func (c *Cluster) Stop() error {
	var err error
	if c.Stack != nil {
		err = c.Stack.Down(false)
		// A stopped agent leaves its pods running, as a kubelet does.
		for _, n := range c.Nodes {
			err = errors.Join(err, nodeagent.CleanupNode(NodeRoot(c.Stack, n), c.net, 30*time.Second))
		}
		// With no pod left, no volume is in use.
		err = errors.Join(err, testenv.ReleaseClusterDaemons(context.Background(), c.Stack))
	}
	for _, d := range c.dirs {
		err = errors.Join(err, os.RemoveAll(d))
	}
	return err
}

// Logs writes the tail of every daemon's and Pod's log, which is what one needs to see why a
// component or a VM did not come up.
func (c *Cluster) Logs(w io.Writer) {
	if c.Stack == nil {
		return
	}
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
