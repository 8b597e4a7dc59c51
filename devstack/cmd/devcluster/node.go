package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/nodeagent"
)

// A node started with `devcluster node up` is a stack daemon named node-agent-<node>, with its
// root directory <state>/nodes/<node> and a marker there that lets up, down and status find it.
const nodeMarker = "devcluster.json"

// nodeSpec is what `node up` was asked for, kept in the marker so that every later command
// rebuilds the same daemon.
type nodeSpec struct {
	Name       string   `json:"name"`
	Bin        string   `json:"bin"`
	BinDir     string   `json:"binDir"`
	ImageStore string   `json:"imageStore"`
	Extra      []string `json:"extra,omitempty"`
}

func nodesDir(s *controlplane.Stack) string           { return filepath.Join(s.Config().StateDir, "nodes") }
func nodeRoot(s *controlplane.Stack, n string) string { return filepath.Join(nodesDir(s), n) }
func nodeDaemon(n string) string                      { return "node-agent-" + n }

// markedNodes lists the nodes `node up` registered, by name.
func markedNodes(s *controlplane.Stack) ([]nodeSpec, error) {
	entries, err := os.ReadDir(nodesDir(s))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []nodeSpec
	for _, e := range entries {
		var ns nodeSpec
		b, err := os.ReadFile(filepath.Join(nodesDir(s), e.Name(), nodeMarker))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &ns); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// nodeComponent is the stack daemon of one node agent. It is ready once the Node is Ready and
// its Lease was renewed by this run.
func nodeComponent(s *controlplane.Stack, ns nodeSpec) controlplane.Component {
	var started time.Time
	args := []string{
		"--kubeconfig", s.KubeconfigPath(), "--node-name", ns.Name,
		"--root-dir", nodeRoot(s, ns.Name), "--bin-dir", ns.BinDir, "--image-store", ns.ImageStore,
		"--cluster-dns", s.Config().ClusterDNSIP().String(), "--cluster-domain", controlplane.ClusterDomain,
		"--registry-config", module.RegistryConfigPath(s),
	}
	return controlplane.Component{
		Name: nodeDaemon(ns.Name),
		Bin:  ns.Bin,
		Args: append(args, ns.Extra...),
		Before: func(context.Context) error {
			started = time.Now().Add(-time.Second)
			return nil
		},
		Ready: func(ctx context.Context) error { return nodeReady(ctx, s, ns.Name, started) },
	}
}

func kubeClient(s *controlplane.Stack) (kubernetes.Interface, error) {
	cfg, err := s.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

func nodeReady(ctx context.Context, s *controlplane.Stack, name string, since time.Time) error {
	// Another agent's Lease would look the same: the node must be this daemon's.
	pid := s.Status()[nodeDaemon(name)]
	if claim, err := nodeagent.Claimant(nodeRoot(s, name)); err != nil || claim.Pid != pid {
		return fmt.Errorf("agent %d has not claimed node %s (%+v, %v)", pid, name, claim, err)
	}
	kube, err := kubeClient(s)
	if err != nil {
		return err
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		return fmt.Errorf("node %s is not Ready", name)
	}
	var lease *coordinationv1.Lease
	if lease, err = kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("lease of node %s: %w", name, err)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since) {
		return fmt.Errorf("lease of node %s not renewed yet", name)
	}
	return nil
}

// withNodes adds the daemons of the marked nodes to the stack, started from binDir's node agent
// when it has one (see startBinDir).
func withNodes(s *controlplane.Stack, binDir string) error {
	nodes, err := markedNodes(s)
	if err != nil {
		return err
	}
	for _, ns := range nodes {
		ns.BinDir = startBinDir(binDir, ns.BinDir, "node-agent")
		ns.Bin = filepath.Join(ns.BinDir, "node-agent")
		s.AddComponents(nodeComponent(s, ns))
	}
	return nil
}

// startBinDir is where a daemon that does not run starts from: the bin directory of the checkout
// that runs devcluster when it has the program, else the one the daemon was set up with (which may
// be another checkout's, or gone). A daemon that runs is found by its record, whatever its binary.
func startBinDir(invoking, recorded, program string) string {
	abs, err := filepath.Abs(invoking)
	if err != nil {
		return recorded
	}
	if _, err := os.Stat(filepath.Join(abs, program)); err != nil {
		return recorded
	}
	return abs
}

// nodeCommand runs `devcluster node up|down|list`.
func nodeCommand(ctx context.Context, s *controlplane.Stack, binDir string, args []string) error {
	usage := errors.New("usage: devcluster node up NODE [-labels k=v,...] [-cpu N] [-memory Q] [-pods N] [-image-store DIR] | node down NODE | node list")
	if len(args) == 0 {
		return usage
	}
	switch args[0] {
	case "list":
		return nodeList(ctx, s, binDir)
	case "up":
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return usage
		}
		return nodeUp(ctx, s, binDir, args[1], args[2:])
	case "down":
		if len(args) != 2 {
			return usage
		}
		return nodeDown(ctx, s, args[1])
	}
	return usage
}

func nodeUp(ctx context.Context, s *controlplane.Stack, binDir, name string, flags []string) error {
	if err := markNode(s, binDir, name, flags); err != nil {
		return err
	}
	if err := withNodes(s, binDir); err != nil {
		return err
	}
	if err := controlplane.EnsureBinaries(os.Stderr); err != nil {
		return err
	}
	if err := s.Up(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "node %s is Ready; agent log in %s/logs/%s.log, pods under %s/pods\n",
		name, s.Config().StateDir, nodeDaemon(name), nodeRoot(s, name))
	fmt.Println(name)
	return nil
}

// markNode writes the marker of a node that has none, from the flags of `node up`; a node that
// exists keeps what it was started with.
func markNode(s *controlplane.Stack, binDir, name string, flags []string) error {
	fs := flag.NewFlagSet("node up", flag.ExitOnError)
	labels := fs.String("labels", "", "extra node labels, k=v,...")
	cpu := fs.String("cpu", "", "CPU capacity (default: the host's cores)")
	memory := fs.String("memory", "", "memory capacity (default: the host's memory)")
	pods := fs.Int("pods", 0, "pod capacity (default 110)")
	store := fs.String("image-store", nodeagent.DefaultImageStore(), "containerDisk image store")
	_ = fs.Parse(flags)

	abs, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	ns := nodeSpec{Name: name, Bin: filepath.Join(abs, "node-agent"), BinDir: abs, ImageStore: *store}
	if _, err := os.Stat(ns.Bin); err != nil {
		return fmt.Errorf("node-agent missing in %s (run make build): %w", abs, err)
	}
	for _, f := range [][2]string{{"--labels", *labels}, {"--cpu", *cpu}, {"--memory", *memory}} {
		if f[1] != "" {
			ns.Extra = append(ns.Extra, f[0], f[1])
		}
	}
	if *pods > 0 {
		ns.Extra = append(ns.Extra, "--pods", strconv.Itoa(*pods))
	}
	marker := filepath.Join(nodeRoot(s, name), nodeMarker)
	if old, err := os.ReadFile(marker); err == nil {
		// A node that exists keeps what it was started with; up only starts it if it stopped.
		if err := json.Unmarshal(old, &ns); err != nil {
			return fmt.Errorf("%s: %w", marker, err)
		}
	} else {
		if err := os.MkdirAll(nodeRoot(s, name), 0o755); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(ns, "", "  ")
		if err := os.WriteFile(marker, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// nodeDown stops a node's agent, stops and removes its pods' processes, namespaces and
// directories, and deletes the Node, so that the cluster forgets its pods too.
func nodeDown(ctx context.Context, s *controlplane.Stack, name string) error {
	root := nodeRoot(s, name)
	var ns nodeSpec
	b, err := os.ReadFile(filepath.Join(root, nodeMarker))
	if err == nil {
		err = json.Unmarshal(b, &ns)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if ns.Bin == "" {
		ns.Bin = "node-agent" // never matches: nothing to stop without a marker
	}
	errs := []error{s.StopComponent(controlplane.Component{Name: nodeDaemon(name), Bin: ns.Bin}, 15*time.Second)}
	errs = append(errs, nodeagent.CleanupNode(root, s.Config().Net, 10*time.Second))
	if kube, err := kubeClient(s); err == nil {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := kube.CoreV1().Nodes().Delete(dctx, name, metav1.DeleteOptions{})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && s.Ready(ctx) == nil {
			errs = append(errs, fmt.Errorf("delete node %s: %w", name, err))
		}
	}
	errs = append(errs, os.RemoveAll(root))
	return errors.Join(errs...)
}

// shutdownNodes removes the pods of every node of the stack, whose agents must have stopped, and
// reports them Failed by the node's shutdown while the apiserver runs: a stack that comes up again
// shows no pod as running that is not.
func shutdownNodes(ctx context.Context, s *controlplane.Stack) error {
	entries, err := os.ReadDir(nodesDir(s))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	var nodes []string
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, nodeagent.CleanupNode(filepath.Join(nodesDir(s), e.Name()), s.Config().Net, 10*time.Second))
			nodes = append(nodes, e.Name())
		}
	}
	if len(nodes) == 0 {
		return errors.Join(errs...)
	}
	if err := s.Ready(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "the apiserver is not running (%v): the pods of %s keep their last status until their agents start again\n", err, strings.Join(nodes, ", "))
		return errors.Join(errs...)
	}
	kube, err := kubeClient(s)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	now := metav1.Now()
	for _, n := range nodes {
		errs = append(errs, nodeagent.ReportNodeShutdown(ctx, kube, n, now))
	}
	return errors.Join(errs...)
}

func nodeList(ctx context.Context, s *controlplane.Stack, binDir string) error {
	nodes, err := markedNodes(s)
	if err != nil {
		return err
	}
	if err := withNodes(s, binDir); err != nil {
		return err
	}
	st := s.Status()
	kube, _ := kubeClient(s)
	for _, ns := range nodes {
		state := "stopped"
		if pid := st[nodeDaemon(ns.Name)]; pid != 0 {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		pods, _ := os.ReadDir(filepath.Join(nodeRoot(s, ns.Name), "pods"))
		ready := "unknown"
		if kube != nil {
			if n, err := kube.CoreV1().Nodes().Get(ctx, ns.Name, metav1.GetOptions{}); err == nil {
				ready = "NotReady"
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready = "Ready"
					}
				}
			} else if apierrors.IsNotFound(err) {
				ready = "unregistered"
			}
		}
		fmt.Printf("%-16s %-22s %-12s %3d pods  %s\n", ns.Name, state, ready, len(pods), nodeRoot(s, ns.Name))
	}
	return nil
}

// imageImport copies a qcow2 disk into the containerDisk image store.
// imagePush pushes a qcow2 as a containerDisk image into the module's DVCR (make image-import).
func imagePush(ctx context.Context, s *controlplane.Stack, args []string) error {
	fs := flag.NewFlagSet("image-push", flag.ExitOnError)
	_ = fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("usage: devcluster image-push NAME DISK.qcow2")
	}
	ref, err := module.PushContainerDisk(ctx, s, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

func imageImport(args []string) error {
	fs := flag.NewFlagSet("image-import", flag.ExitOnError)
	store := fs.String("store", nodeagent.DefaultImageStore(), "image store directory")
	_ = fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("usage: devcluster image-import [-store DIR] IMAGE DISK.qcow2")
	}
	p, err := nodeagent.ImportImage(*store, fs.Arg(0), fs.Arg(1))
	if err != nil {
		return err
	}
	fmt.Println(p)
	return nil
}
