package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/module"
)

// A stack that runs the module from the chart keeps this marker in its state directory, so that
// up, down and status see the users' rewriter too.
const moduleMarker = "module.json"

// moduleSpec is what `module up` keeps in the marker.
type moduleSpec struct {
	// BinDir is absolute: the stack recognises the users' rewriter by its executable's path.
	BinDir string `json:"binDir"`
}

// moduleReadyTimeout bounds the wait for virt-operator to install the core.
const moduleReadyTimeout = 10 * time.Minute

func readModuleMarker(s *controlplane.Stack) (moduleSpec, bool, error) {
	var ms moduleSpec
	b, err := os.ReadFile(filepath.Join(s.Config().StateDir, moduleMarker))
	if errors.Is(err, os.ErrNotExist) {
		return ms, false, nil
	}
	if err != nil {
		return ms, false, err
	}
	if err := json.Unmarshal(b, &ms); err != nil {
		return ms, false, fmt.Errorf("%s: %w", moduleMarker, err)
	}
	return ms, true, nil
}

// withModule adds the users' rewriter of a stack that runs the module.
func withModule(s *controlplane.Stack, ms moduleSpec, portBase int) error {
	c, err := module.UsersRewriter(s, ms.BinDir, module.KubeconfigPath(s), portBase+10)
	if err != nil {
		return err
	}
	s.AddComponents(c)
	return nil
}

// moduleCommand runs `devcluster module up|down`.
func moduleCommand(ctx context.Context, s *controlplane.Stack, binDir string, portBase int, args []string) error {
	usage := errors.New("usage: devcluster module up [-nodes node1,...] [-repo DIR] [-set k=v]... | module down | module wait-vm [-n NS] [-timeout D] VM | module example [-f FILE] [-timeout D]")
	if len(args) == 0 {
		return usage
	}
	switch args[0] {
	case "up":
		return moduleUp(ctx, s, binDir, portBase, args[1:])
	case "down":
		return moduleDown(ctx, s, args[1:])
	case "wait-vm":
		fs := flag.NewFlagSet("module wait-vm", flag.ExitOnError)
		ns := fs.String("n", "default", "the VM's namespace")
		timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait")
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return usage
		}
		return module.WaitVM(ctx, module.Options{Stack: s, Log: os.Stderr}, *ns, fs.Arg(0), *timeout)
	case "example":
		return moduleExample(ctx, s, args[1:])
	}
	return usage
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// moduleUp starts the stack with its nodes and the users' rewriter, installs the chart with the
// local values and waits until the module is ready. It prints the kubeconfig that speaks
// kubevirt.io last.
func moduleUp(ctx context.Context, s *controlplane.Stack, binDir string, portBase int, args []string) error {
	fs := flag.NewFlagSet("module up", flag.ExitOnError)
	nodes := fs.String("nodes", "node1", "comma-separated local nodes (node agents) to run the module and the VMs on")
	repo := fs.String("repo", ".", "repository root: charts/virtualization and devstack/chart-values/local.yaml")
	var set listFlag
	fs.Var(&set, "set", "another helm --set value (repeatable)")
	_ = fs.Parse(args)

	abs, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	if err := controlplane.EnsureBinaries(os.Stderr); err != nil {
		return err
	}
	names := splitList(*nodes)
	if len(names) == 0 {
		return errors.New("module up: at least one node runs the module's pods")
	}
	for _, n := range names {
		if err := markNode(s, binDir, n, nil); err != nil {
			return err
		}
	}
	if err := withNodes(s, binDir); err != nil {
		return err
	}
	ms := moduleSpec{BinDir: abs}
	if _, ok, err := readModuleMarker(s); err != nil {
		return err
	} else if !ok {
		// main added the rewriter already when the marker existed.
		if err := withModule(s, ms, portBase); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(s.Config().StateDir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(ms)
	if err := os.WriteFile(filepath.Join(s.Config().StateDir, moduleMarker), b, 0o644); err != nil {
		return err
	}
	if err := s.Up(ctx); err != nil {
		return err
	}
	repoAbs, err := filepath.Abs(*repo)
	if err != nil {
		return err
	}
	o := module.Options{Stack: s, Repo: repoAbs, BinDir: abs, Nodes: names, Set: set, Log: os.Stderr}
	start := time.Now()
	if err := module.InstallMonitoringCRDs(ctx, o); err != nil {
		return err
	}
	if err := module.Install(ctx, o); err != nil {
		return err
	}
	if err := module.WaitReady(ctx, o, moduleReadyTimeout); err != nil {
		return fmt.Errorf("%w\n(pods: kubectl --kubeconfig %s -n %s get pods; their logs: %s/nodes/*/pods/*/logs)",
			err, s.KubeconfigPath(), module.Namespace, s.Config().StateDir)
	}
	// The nodes pull from DVCR from now on (they read the file at every pull).
	if err := module.WriteNodeRegistryConfig(ctx, s); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "the module is installed (helm release %s in %s, %s); kubectl speaks kubevirt.io with --kubeconfig %s\n",
		module.Release, module.Namespace, time.Since(start).Round(time.Second), module.KubeconfigPath(s))
	fmt.Println(module.KubeconfigPath(s))
	return nil
}

// moduleDown turns the module off as docs/chart.md says, leaving the VMs' objects in place:
// delete the KubeVirt resource while virt-operator still runs, then helm uninstall.
func moduleDown(ctx context.Context, s *controlplane.Stack, args []string) error {
	fs := flag.NewFlagSet("module down", flag.ExitOnError)
	_ = fs.Parse(args)
	cfg, err := s.RESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kvs := dyn.Resource(module.KubeVirtResource).Namespace(module.Namespace)
	switch err := kvs.Delete(ctx, "kubevirt", metav1.DeleteOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		fmt.Fprintln(os.Stderr, "waiting for virt-operator to remove the core...")
		deadline := time.Now().Add(moduleReadyTimeout)
		for {
			if _, err := kvs.Get(ctx, "kubevirt", metav1.GetOptions{}); err != nil {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("the KubeVirt resource is still there after 10m")
			}
			time.Sleep(time.Second)
		}
	}
	if err := module.Uninstall(ctx, module.Options{Stack: s}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "the module is off (helm release %s uninstalled); VMs and their disks stay, `module up` brings it back\n", module.Release)
	return nil
}

// moduleExample applies the example (examples/vm.yaml: friendly objects, DVCR's CA filled in by
// module.Example) and waits, printing each change, until its VMs run.
func moduleExample(ctx context.Context, s *controlplane.Stack, args []string) error {
	fs := flag.NewFlagSet("module example", flag.ExitOnError)
	file := fs.String("f", module.ExampleFile("."), "the example's manifests")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long to wait for its VMs to run")
	_ = fs.Parse(args)
	o := module.Options{Stack: s, Log: os.Stderr}
	ca, err := module.DVCRCA(ctx, o)
	if err != nil {
		return err
	}
	objs, err := module.Example(*file, ca)
	if err != nil {
		return err
	}
	if err := module.ApplyExample(ctx, o, objs); err != nil {
		return err
	}
	return module.WaitExample(ctx, o, objs, *timeout)
}
