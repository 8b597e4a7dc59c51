// Command node-agent is the local stack's node: it registers a Node and runs the pods bound to it
// as host processes, standing in for kubelet and a container runtime (see devstack/nodeagent).
//
//	node-agent --kubeconfig <stack>/admin.kubeconfig --node-name n1 --bin-dir /work/main/bin
//
// SIGTERM or SIGINT stop the agent and leave the pods running; the next run adopts them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/nodeagent"
)

func main() {
	// The agent re-executes itself as the supervisor and the init of every container.
	if handled, code := nodeagent.RunSubcommand(os.Args[1:]); handled {
		os.Exit(code)
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "node-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("node-agent", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "admin kubeconfig of the local stack")
	nodeName := fs.String("node-name", "", "name of the Node to register (required)")
	stackName := fs.String("stack", envOr("D8V_STACK", "dev"), "stack name, for the default --root-dir")
	rootDir := fs.String("root-dir", "", "node state and pod directories (default <cache>/stacks/<stack>/nodes/<node>)")
	binDir := fs.String("bin-dir", "", "directory of the binaries that stand in for images, as make build fills it (absolute)")
	imageStore := fs.String("image-store", nodeagent.DefaultImageStore(), "containerDisk image store: <store>/<url.PathEscape(image)>/disk.qcow2")
	cpu := fs.String("cpu", "", "CPU capacity (default: the host's cores)")
	memory := fs.String("memory", "", "memory capacity, e.g. 8Gi (default: the host's memory)")
	pods := fs.Int("pods", 110, "pod capacity")
	labels := fs.String("labels", "", "extra node labels, k=v,...")
	privateDirs := fs.String("private-dirs", "/run/libvirt,/var/lib/libvirt,/var/log/libvirt,/var/cache/libvirt,/tmp,/etc/libvirt:seed",
		"host directories each container sees as fresh private directories; :seed copies the host's contents in")
	apiServer := fs.String("apiserver", "", "host:port of the apiserver as pods reach it (default: the kubeconfig's server)")
	kubeletPort := fs.Int("kubelet-port", 0, "port on the bridge address that serves kubectl logs (0: any free port, -1: none)")
	clusterDNS := fs.String("cluster-dns", "", "nameservers of ClusterFirst pods, comma-separated (default: the cluster IP of kube-system/kube-dns, if there is one)")
	clusterDomain := fs.String("cluster-domain", "cluster.local", "the cluster's DNS domain, for the pods' search path")
	resolvConf := fs.String("resolv-conf", "/etc/resolv.conf", "the node's resolv.conf, for Default pods")
	registries := fs.String("registry-config", "", `JSON file of the registries whose images are pulled, as containerd's hosts.toml configures a node: {"host:port": {"ca": "ca.pem"} or {"plainHTTP": true}}, read at every pull (a missing file names none); other images run from --bin-dir`)
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	_ = fs.Parse(os.Args[1:])

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if *logFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, opts)
	}
	logger := slog.New(handler)
	slog.SetDefault(logger)

	if *nodeName == "" {
		return fmt.Errorf("--node-name is required")
	}
	if *kubeconfig == "" {
		return fmt.Errorf("--kubeconfig is required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load %s: %w", *kubeconfig, err)
	}
	cfg := nodeagent.Config{
		RESTConfig: rc, NodeName: *nodeName, RootDir: *rootDir, BinDir: *binDir,
		ImageStore: *imageStore, Pods: *pods, APIServer: *apiServer, KubeletPort: *kubeletPort, Logger: logger,
	}
	if cfg.RootDir == "" {
		cfg.RootDir = nodeagent.DefaultRootDir(*stackName, *nodeName)
	}
	if cfg.BinDir != "" && !filepath.IsAbs(cfg.BinDir) {
		return fmt.Errorf("--bin-dir %q: want an absolute path", cfg.BinDir)
	}
	if *cpu != "" {
		if cfg.CPU, err = resource.ParseQuantity(*cpu); err != nil {
			return fmt.Errorf("--cpu: %w", err)
		}
	}
	if *memory != "" {
		if cfg.Memory, err = resource.ParseQuantity(*memory); err != nil {
			return fmt.Errorf("--memory: %w", err)
		}
	}
	if *labels != "" {
		cfg.Labels = map[string]string{}
		for _, kv := range strings.Split(*labels, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || k == "" {
				return fmt.Errorf("--labels: %q is not k=v", kv)
			}
			cfg.Labels[k] = v
		}
	}
	cfg.ClusterDomain = *clusterDomain
	cfg.RegistryConfig = *registries
	if cfg.NodeDNS, err = readResolvConf(*resolvConf); err != nil {
		return err
	}
	if *clusterDNS != "" {
		cfg.ClusterDNS = strings.Split(*clusterDNS, ",")
	} else if cfg.ClusterDNS, err = discoverClusterDNS(rc); err != nil {
		return err
	}
	if cfg.ClusterDNS == nil {
		logger.Warn("no cluster DNS (no --cluster-dns, no Service kube-system/kube-dns): ClusterFirst pods get the node's resolv.conf")
	}
	if cfg.PrivateDirs, err = nodeagent.ParsePrivateDirs(*privateDirs); err != nil {
		return err
	}
	if cfg.PrivateDirs == nil {
		cfg.PrivateDirs = []nodeagent.PrivateDir{}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	return nodeagent.Run(ctx, cfg)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func readResolvConf(path string) (nodeagent.DNSConf, error) {
	f, err := os.Open(path)
	if err != nil {
		return nodeagent.DNSConf{}, fmt.Errorf("--resolv-conf: %w", err)
	}
	defer f.Close()
	return nodeagent.ParseResolvConf(f)
}

// discoverClusterDNS is the cluster IP of kube-system/kube-dns, which the stack's service-proxy
// makes; none when the stack has no such Service.
func discoverClusterDNS(rc *rest.Config) ([]string, error) {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	svc, err := kube.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the cluster DNS: %w", err)
	}
	return []string{svc.Spec.ClusterIP}, nil
}
