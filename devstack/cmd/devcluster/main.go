// Command devcluster starts and stops the local Kubernetes control plane and its test hosts.
//
//	devcluster [flags] up            start the stack (idempotent) with its service-proxy (Services
//	                                 and cluster DNS) and local-provisioner (the default
//	                                 StorageClass local); prints the kubeconfig path last
//	devcluster [flags] down [-purge] stop every daemon by pid; -purge also deletes its state
//	devcluster [flags] status        show each daemon and its pid
//	devcluster [flags] node up NODE [-labels k=v,...] [-cpu N] [-memory Q] [-pods N] [-image-store DIR]
//	                                 start a node agent (a Node running pods as host processes);
//	                                 idempotent; prints the node name
//	devcluster [flags] node down NODE  stop the agent, remove its pods and the Node
//	devcluster [flags] node list     show the nodes with their agents' state
//	devcluster [flags] module up [-nodes node1,...] [-repo DIR] [-set k=v]...
//	                                 start the stack with its nodes and install the module:
//	                                 helm upgrade --install of charts/virtualization with
//	                                 devstack/chart-values/local.yaml, then wait until it is
//	                                 ready; prints the kubeconfig that speaks kubevirt.io last
//	devcluster [flags] module down   turn the module off (delete the KubeVirt, helm uninstall)
//	devcluster [flags] prometheus up [-addr host:port]
//	                                 (re)start Debian's Prometheus on the stack, scraping the
//	                                 module's ServiceMonitors through kube-rbac-proxy as the
//	                                 account d8v-prometheus/prometheus, and prometheus-sd, which
//	                                 keeps its targets current; prints its URL last
//	devcluster [flags] module example [-f examples/vm.yaml] [-timeout D]
//	                                 apply the example (friendly objects; DVCR's CA filled in
//	                                 for images in DVCR) and wait, printing each change, until
//	                                 its VMs run
//	devcluster [flags] module wait-vm [-n NS] [-timeout D] VM
//	                                 wait until the VM runs: Running, and its VMI's launcher
//	                                 Pod Running and Ready (not fooled by the status a
//	                                 restarted stack kept)
//	devcluster image-import [-store DIR] IMAGE DISK
//	                                 copy a qcow2 into the containerDisk image store
//	devcluster [flags] image-push NAME DISK
//	                                 push a qcow2 into the module's DVCR as the containerDisk
//	                                 image local/NAME:latest; prints the reference pods pull
//	                                 (dvcr.d8-virtualization.svc/local/NAME:latest)
//	devcluster host add|del NAME     create or remove a test host (network namespace)
//	devcluster host list             list the test hosts with their addresses
//	devcluster net-down              remove every test host and the bridge
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/svcproxy"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("name", envOr("D8V_STACK", "dev"), "stack name; its state lives in <cache>/stacks/<name> (env D8V_STACK)")
	stateDir := flag.String("state-dir", os.Getenv("D8V_STATE_DIR"), "state directory, overriding the one derived from -name (env D8V_STATE_DIR)")
	binDir := flag.String("bin-dir", envOr("D8V_BIN_DIR", "bin"), "where make build put the module's binaries (env D8V_BIN_DIR)")
	portBase := flag.Int("port-base", envInt("D8V_PORT_BASE", 6440), "etcd client port; peer, controller-manager, apiserver and scheduler follow (env D8V_PORT_BASE)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "Usage: devcluster [flags] up|down [-purge]|status|node up|down|list [NODE]|module up|down|image-import IMAGE DISK|host add|del|list [NAME]|net-down")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		return errors.New("no command")
	}

	cfg, err := controlplane.DefaultConfig(*name, *portBase, os.Stderr)
	if err != nil {
		return err
	}
	if *stateDir != "" {
		cfg.StateDir = *stateDir
	}
	s, err := controlplane.New(cfg)
	if err != nil {
		return err
	}
	// The provisioner comes right after the control plane: the nodes' pods need their volumes. A
	// running one is found by its record, whatever checkout started it.
	provisionerBin, err := daemonBinary(*binDir, provisioner.Daemon)
	if err != nil {
		return err
	}
	proxyBin, err := daemonBinary(*binDir, svcproxy.Daemon)
	if err != nil {
		return err
	}
	// The service proxy (Services and cluster DNS) comes first: pods of the nodes and the
	// module's programs reach each other by Service.
	s.AddComponents(svcproxy.StackComponent(s, proxyBin),
		provisioner.StackComponent(s, provisionerBin))
	if len(args) == 0 || args[0] != "prometheus" {
		if err := withPrometheus(s, *binDir); err != nil {
			return err
		}
	}
	switch ms, ok, err := readModuleMarker(s); {
	case err != nil:
		return err
	case ok:
		ms.BinDir = startBinDir(*binDir, ms.BinDir, "kube-api-rewriter")
		if err := withModule(s, ms, *portBase); err != nil {
			return err
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	switch args[0] {
	case "up":
		if err := controlplane.EnsureBinaries(os.Stderr); err != nil {
			return err
		}
		if err := withNodes(s, *binDir); err != nil {
			return err
		}
		if err := s.Up(ctx); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "apiserver %s is ready; logs in %s/logs\n", s.Server(), cfg.StateDir)
		fmt.Println(s.KubeconfigPath())
	case "down":
		fs := flag.NewFlagSet("down", flag.ExitOnError)
		purge := fs.Bool("purge", false, "also delete the state directory (etcd data, PKI, logs)")
		_ = fs.Parse(args[1:])
		if err := withNodes(s, *binDir); err != nil {
			return err
		}
		// Node agents and the module's programs stop first (agents leave their pods running),
		// then the pods go and the apiserver learns it, as from a graceful node shutdown. With no
		// pod left, the volumes are unmounted and detached (their files stay for the next up,
		// whose provisioner attaches them again); the control plane stops last.
		err := s.StopComponents()
		err = errors.Join(err, shutdownNodes(ctx, s))
		err = errors.Join(err, provisioner.ReleaseVolumes(ctx, s))
		return errors.Join(err, s.Down(*purge))
	case "status":
		if err := withNodes(s, *binDir); err != nil {
			return err
		}
		st := s.Status()
		names := make([]string, 0, len(st))
		for n := range st {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if st[n] == 0 {
				fmt.Printf("%-24s stopped\n", n)
			} else {
				fmt.Printf("%-24s running (pid %d)\n", n, st[n])
			}
		}
		if !s.Running() {
			return errors.New("stack is not fully running")
		}
	case "node":
		return nodeCommand(ctx, s, *binDir, args[1:])
	case "module":
		return moduleCommand(ctx, s, *binDir, *portBase, args[1:])
	case "prometheus":
		if len(args) < 2 || args[1] != "up" {
			return errors.New("usage: devcluster prometheus up [-addr host:port]")
		}
		return prometheusUp(ctx, s, *binDir, *portBase, args[2:])
	case "image-import":
		return imageImport(args[1:])
	case "image-push":
		return imagePush(ctx, s, args[1:])
	case "host":
		return host(cfg.Net, args[1:])
	case "net-down":
		return netDown(cfg.Net)
	default:
		flag.Usage()
		return fmt.Errorf("unknown command %q", args[0])
	}
	return nil
}

func host(n localnet.Net, args []string) error {
	if len(args) == 1 && args[0] == "list" {
		hosts, err := n.Hosts()
		if err != nil {
			return err
		}
		for _, h := range hosts {
			fmt.Printf("%-20s %-16s netns %s\n", h.Name, h.IP, h.NetNS)
		}
		return nil
	}
	if len(args) != 2 {
		return errors.New("usage: devcluster host add|del|list [NAME]")
	}
	switch args[0] {
	case "add":
		h, err := n.AddHost(args[1])
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", h.NetNS, h.IP)
		return nil
	case "del":
		return n.DeleteHost(args[1])
	}
	return fmt.Errorf("unknown host command %q", args[0])
}

func netDown(n localnet.Net) error {
	hosts, err := n.Hosts()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hosts {
		errs = append(errs, n.DeleteHost(h.Name))
	}
	if _, err := net.InterfaceByName(n.Bridge); err == nil {
		errs = append(errs, n.DeleteBridge())
	}
	return errors.Join(errs...)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(key), &v); err == nil {
		return v
	}
	return def
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(strings.TrimSpace(s), ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
