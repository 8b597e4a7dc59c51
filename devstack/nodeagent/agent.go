// Package nodeagent is the local stack's stand-in for kubelet and a container runtime. It registers
// a Node, keeps its Lease and runs every pod bound to it as host processes, on top of
// virtual-kubelet's NodeController and PodController:
//
//   - each pod gets a network namespace with its own address on the local bridge (devstack/localnet),
//     shared by its containers, and a directory <root>/pods/<uid>/ laid out as kubelet lays it out
//     (see Layout: emptyDir volumes live at volumes/kubernetes.io~empty-dir/<name>);
//   - each container is a program from --bin-dir named after its image (or its command), run in
//     a mount and UTS namespace of its own with its volumeMounts, its termination log and private
//     directories over a configurable list of host directories;
//   - status (phases, container states, restart counts, conditions with readiness gates) is pushed
//     to the pod controller as it changes.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/imagepull"
	"github.com/d8virt/devstack/localnet"
)

// PrivateDir is a host directory that every container sees as a fresh private directory of its
// own, standing in for a container's root filesystem; Seed copies the host's contents in first.
type PrivateDir struct {
	Path string
	Seed bool
}

// DefaultPrivateDirs keep the libvirt daemons of two virt-launchers apart.
func DefaultPrivateDirs() []PrivateDir {
	return []PrivateDir{
		{Path: "/run/libvirt"}, {Path: "/var/lib/libvirt"}, {Path: "/var/log/libvirt"},
		{Path: "/var/cache/libvirt"}, {Path: "/tmp"}, {Path: "/etc/libvirt", Seed: true},
	}
}

// ParsePrivateDirs reads "path[:seed],..." (seed copies the host's contents in).
func ParsePrivateDirs(s string) ([]PrivateDir, error) {
	var out []PrivateDir
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, opt, _ := strings.Cut(item, ":")
		if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
			return nil, fmt.Errorf("private dir %q: want an absolute path other than /", p)
		}
		if opt != "" && opt != "seed" {
			return nil, fmt.Errorf("private dir %q: unknown option %q (want seed)", p, opt)
		}
		out = append(out, PrivateDir{Path: filepath.Clean(p), Seed: opt == "seed"})
	}
	return out, nil
}

// Config configures one node.
type Config struct {
	// RESTConfig talks to the apiserver (the stack's admin kubeconfig).
	RESTConfig *rest.Config
	NodeName   string
	// RootDir keeps the node's state and its pods' directories (see Layout).
	RootDir string
	// BinDir is where make build puts the binaries that stand in for images (absolute).
	BinDir string
	// ImageStore holds containerDisk images as <store>/<escaped ref>/disk.qcow2 (see ImagePath).
	ImageStore string
	// CPU, Memory and Pods are the node's capacity; zero means the host's cores, its memory and 110.
	CPU    resource.Quantity
	Memory resource.Quantity
	Pods   int
	Labels map[string]string
	// PrivateDirs default to DefaultPrivateDirs.
	PrivateDirs []PrivateDir
	// AgentBinary is the node-agent program, re-executed for the container shim and init; the
	// default /proc/self/exe is right when the agent runs as bin/node-agent.
	AgentBinary string
	// Net is the local network; its gateway is the node's InternalIP.
	Net localnet.Net
	// APIServer overrides host:port of the apiserver as pods reach it (KUBERNETES_SERVICE_HOST
	// and _PORT); the default is the host of RESTConfig.
	APIServer string
	// InitialBackoff and MaxBackoff bound container restart back-off (default 10s and 5m).
	InitialBackoff, MaxBackoff time.Duration
	// VolumeResync is how often configMap, secret and downward API volumes are refreshed (1m).
	VolumeResync time.Duration
	// Workers is the number of pod sync workers (default 8).
	Workers int
	// KubeletPort serves kubectl logs on the bridge address; 0 picks a free port, -1 disables it.
	KubeletPort int
	// ClusterDNS and ClusterDomain are kubelet's --cluster-dns and --cluster-domain: the
	// nameservers of ClusterFirst pods and the domain of their search path (default
	// cluster.local). Without ClusterDNS, ClusterFirst pods get NodeDNS, as on kubelet.
	ClusterDNS    []string
	ClusterDomain string
	// NodeDNS is the node's resolv.conf (kubelet's --resolv-conf) for Default pods.
	NodeDNS DNSConf
	// RegistryConfig is a JSON file of the registries whose images are pulled (imagepull.Hosts,
	// with their TLS trust) into <root>/images, read at every pull; every other image runs as a
	// program of BinDir (see ResolveExecutable). Empty, or a file that does not exist, names none.
	RegistryConfig string
	Logger         *slog.Logger
}

func (c *Config) allocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    c.CPU,
		corev1.ResourceMemory: c.Memory,
		corev1.ResourcePods:   *resource.NewQuantity(int64(c.Pods), resource.DecimalSI),
	}
}

// DefaultRootDir is ~/.cache/d8-virtualization/stacks/<stack>/nodes/<node>.
func DefaultRootDir(stackName, nodeName string) string {
	return filepath.Join(controlplane.CacheRoot(), "stacks", stackName, "nodes", nodeName)
}

// DefaultImageStore is ~/.cache/d8-virtualization/images.
func DefaultImageStore() string { return filepath.Join(controlplane.CacheRoot(), "images") }

func (c *Config) complete() error {
	if c.RESTConfig == nil || c.NodeName == "" || c.RootDir == "" {
		return errors.New("nodeagent: RESTConfig, NodeName and RootDir are required")
	}
	if c.BinDir != "" && !filepath.IsAbs(c.BinDir) {
		abs, err := filepath.Abs(c.BinDir)
		if err != nil {
			return err
		}
		c.BinDir = abs
	}
	if c.CPU.IsZero() {
		c.CPU = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
	}
	if c.Memory.IsZero() {
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err != nil {
			return fmt.Errorf("host memory: %w", err)
		}
		c.Memory = *resource.NewQuantity(int64(si.Totalram)*int64(si.Unit), resource.BinarySI)
	}
	if c.Pods == 0 {
		c.Pods = 110
	}
	if c.PrivateDirs == nil {
		c.PrivateDirs = DefaultPrivateDirs()
	}
	if c.AgentBinary == "" {
		c.AgentBinary = "/proc/self/exe"
	}
	if c.Net.Bridge == "" {
		n, err := localnet.Default()
		if err != nil {
			return err
		}
		c.Net = n
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = 10 * time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 5 * time.Minute
	}
	if c.VolumeResync == 0 {
		c.VolumeResync = time.Minute
	}
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Run registers the node and runs its pods until ctx ends. Ending it leaves the pods' processes
// running: a later Run with the same root directory adopts them.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	lg := cfg.Logger.With("node", cfg.NodeName)
	// virtual-kubelet logs through its own interface.
	log.L = vkLogger{l: lg.With("component", "virtual-kubelet")}
	ctx = log.WithLogger(ctx, log.L)

	for _, d := range []string{cfg.RootDir, filepath.Join(cfg.RootDir, "pods")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	release, err := claimNode(cfg.RootDir, cfg.NodeName)
	if err != nil {
		return err
	}
	defer release()
	unshare, err := SharePodsDir(filepath.Join(cfg.RootDir, "pods"))
	if err != nil {
		return fmt.Errorf("pods dir: %w", err)
	}
	defer func() {
		if err := unshare(); err != nil {
			lg.Warn("pods dir", "err", err)
		}
	}()
	if cfg.ImageStore != "" {
		if err := os.MkdirAll(cfg.ImageStore, 0o755); err != nil {
			return fmt.Errorf("image store: %w", err)
		}
	}
	if err := cfg.Net.Ensure(); err != nil {
		return fmt.Errorf("local network: %w", err)
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	rc.QPS, rc.Burst = 50, 100
	rc.UserAgent = "d8v-node-agent/" + cfg.NodeName
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	apiHost, apiPort, err := apiServerAddress(cfg.APIServer, rc.Host)
	if err != nil {
		return err
	}
	ca := rc.CAData
	if len(ca) == 0 && rc.CAFile != "" {
		if ca, err = os.ReadFile(rc.CAFile); err != nil {
			return fmt.Errorf("CA: %w", err)
		}
	}

	registries := func() (imagepull.Hosts, error) { return imagepull.Hosts{}, nil }
	if cfg.RegistryConfig != "" {
		registries = func() (imagepull.Hosts, error) { return imagepull.LoadHosts(cfg.RegistryConfig) }
	}
	// Registries are reached by their names in the cluster's DNS, as pods would (DVCR is a
	// Service); a node without cluster DNS uses the host's resolver.
	dial := imagepull.HostDialer()
	if len(cfg.ClusterDNS) > 0 {
		dial = imagepull.ClusterDialer(net.JoinHostPort(cfg.ClusterDNS[0], "53"), cfg.ClusterDomain)
	}
	puller, err := imagepull.New(filepath.Join(cfg.RootDir, "images"), registries, dial)
	if err != nil {
		return err
	}
	p := &Provider{
		cfg: &cfg, log: lg, kube: kube, layout: Layout{Root: cfg.RootDir}, net: cfg.Net, puller: puller,
		hostIP: cfg.Net.GatewayIP().String(), apiHost: apiHost, apiPort: apiPort, caCert: ca, ctx: ctx,
		byUID: map[types.UID]*podRuntime{}, byName: map[string]types.UID{},
	}

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "d8v-node-agent", Host: cfg.NodeName})
	p.recorder = recorder

	podFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	}))
	podInformer := podFactory.Core().V1().Pods()
	p.lister = podInformer.Lister()
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			op, ok1 := o.(*corev1.Pod)
			np, ok2 := n.(*corev1.Pod)
			if ok1 && ok2 {
				p.onAPIPodUpdate(op, np)
			}
		},
		DeleteFunc: func(o any) {
			if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if pod, ok := o.(*corev1.Pod); ok {
				p.onAPIPodDelete(pod)
			}
		},
	}); err != nil {
		return err
	}
	// The pod controller insists on these informers for its own env resolution, which the agent
	// does itself (with the pod's IP); they are never started, so they cache nothing.
	idle := informers.NewSharedInformerFactory(kube, 0).Core().V1()

	if err := p.recoverPods(); err != nil {
		return fmt.Errorf("recover pods: %w", err)
	}

	if cfg.KubeletPort >= 0 {
		ln, err := listenKubelet(p.hostIP, cfg.KubeletPort)
		if err != nil {
			return err
		}
		cfg.KubeletPort = ln.Addr().(*net.TCPAddr).Port
		go p.serveKubelet(ctx, ln)
	}

	nodeObj := nodeObject(&cfg)
	nodes := kube.CoreV1().Nodes()
	nc, err := node.NewNodeController(nodeProvider{}, nodeObj, nodes,
		node.WithNodeEnableLeaseV1(kube.CoordinationV1().Leases(corev1.NamespaceNodeLease), node.DefaultLeaseDuration),
		node.WithNodeStatusUpdateErrorHandler(func(ctx context.Context, err error) error {
			if !apierrors.IsNotFound(err) {
				return err
			}
			lg.Warn("node object is gone, registering it again")
			_, err = nodes.Create(ctx, nodeObject(&cfg), metav1.CreateOptions{})
			return err
		}),
	)
	if err != nil {
		return err
	}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:                             podsClient{kube: kube},
		PodInformer:                           podInformer,
		EventRecorder:                         quietRecorder{recorder},
		Provider:                              p,
		ConfigMapInformer:                     idle.ConfigMaps(),
		SecretInformer:                        idle.Secrets(),
		ServiceInformer:                       idle.Services(),
		SyncPodsFromKubernetesShouldRetryFunc: retryTerminating,
		SkipDownwardAPIResolution:             true,
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if err := nc.Run(ctx); err != nil && ctx.Err() == nil {
			lg.Error("node controller stopped", "err", err)
			cancel()
		}
	}()
	select {
	case <-nc.Ready():
	case <-nc.Done():
		return fmt.Errorf("register node: %w", nc.Err())
	case <-ctx.Done():
		return ctx.Err()
	}
	lg.Info("node registered", "cpu", cfg.CPU.String(), "memory", cfg.Memory.String(), "pods", cfg.Pods, "root", cfg.RootDir)
	podFactory.Start(ctx.Done())
	go func() {
		if err := pc.Run(ctx, cfg.Workers); err != nil && ctx.Err() == nil {
			lg.Error("pod controller stopped", "err", err)
			cancel()
		}
	}()
	select {
	case <-pc.Ready():
		lg.Info("pod controller ready")
	case <-pc.Done():
		return fmt.Errorf("pod controller: %w", pc.Err())
	case <-ctx.Done():
	}
	<-ctx.Done()
	<-pc.Done()
	<-nc.Done()
	podFactory.Shutdown()
	lg.Info("node agent stopped; pods keep running")
	return nil
}

// apiServerAddress is where pods reach the apiserver: override, or the REST config's host.
func apiServerAddress(override, restHost string) (string, string, error) {
	hp := override
	if hp == "" {
		u, err := url.Parse(restHost)
		if err != nil || u.Host == "" {
			return "", "", fmt.Errorf("apiserver address from %q: %v", restHost, err)
		}
		hp = u.Host
		if u.Port() == "" {
			hp = net.JoinHostPort(u.Hostname(), "443")
		}
	}
	h, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", "", fmt.Errorf("apiserver address %q: %w", hp, err)
	}
	return h, port, nil
}

// nodeObject is the Node as the agent registers it: no taints, the host's (or configured)
// capacity, Ready, and the bridge address as InternalIP.
func nodeObject(cfg *Config) *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:   cfg.NodeName,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
		"d8v.io/node-agent":    "true",
	}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	annotations := map[string]string{}
	if cfg.ImageStore != "" {
		annotations["d8v.io/image-store"] = cfg.ImageStore
	}
	if cfg.BinDir != "" {
		annotations["d8v.io/bin-dir"] = cfg.BinDir
	}
	annotations["d8v.io/root-dir"] = cfg.RootDir
	capacity := cfg.allocatable()
	var st unix.Statfs_t
	if unix.Statfs(cfg.RootDir, &st) == nil {
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*st.Bsize, resource.BinarySI)
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	kernel := ""
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	machineID, _ := os.ReadFile("/etc/machine-id")
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	var endpoints corev1.NodeDaemonEndpoints
	if cfg.KubeletPort > 0 {
		endpoints.KubeletEndpoint.Port = int32(cfg.KubeletPort)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, Labels: labels, Annotations: annotations},
		Status: corev1.NodeStatus{
			DaemonEndpoints: endpoints,
			Capacity:        capacity,
			Allocatable:     capacity.DeepCopy(),
			Phase:           corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "d8v node agent is posting ready status"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "node agent has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "node agent has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "node agent has sufficient PID available"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "pods are on the local bridge"),
			},
			// No Hostname address: the apiserver would try it first to reach the kubelet port, and
			// node names do not resolve here.
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: cfg.Net.GatewayIP().String()}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               strings.TrimSpace(string(machineID)),
				SystemUUID:              strings.TrimSpace(string(machineID)),
				BootID:                  strings.TrimSpace(string(bootID)),
				KernelVersion:           kernel,
				OSImage:                 "d8v local node",
				ContainerRuntimeVersion: "d8v-node-agent://" + controlplane.K8sVersion,
				KubeletVersion:          controlplane.K8sVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		},
	}
}

// nodeProvider answers virtual-kubelet's node pings: the agent is alive while it runs.
type nodeProvider struct{}

func (nodeProvider) Ping(ctx context.Context) error                       { return ctx.Err() }
func (nodeProvider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

// vkLogger routes virtual-kubelet's logging to slog. (The adapter virtual-kubelet ships in
// log/slog panics on non-string arguments, which its pod controller passes, so it is not used.)
// Messages about errTerminating, which only means "come back soon", are demoted to debug.
type vkLogger struct {
	l     *slog.Logger
	quiet bool
}

func (v vkLogger) log(level slog.Level, msg string) {
	if v.quiet && level > slog.LevelDebug {
		level = slog.LevelDebug
	}
	v.l.Log(context.Background(), level, msg)
}

func (v vkLogger) Debug(args ...any)            { v.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (v vkLogger) Debugf(f string, args ...any) { v.log(slog.LevelDebug, fmt.Sprintf(f, args...)) }
func (v vkLogger) Info(args ...any)             { v.log(slog.LevelInfo, fmt.Sprint(args...)) }
func (v vkLogger) Infof(f string, args ...any)  { v.log(slog.LevelInfo, fmt.Sprintf(f, args...)) }
func (v vkLogger) Warn(args ...any)             { v.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (v vkLogger) Warnf(f string, args ...any)  { v.log(slog.LevelWarn, fmt.Sprintf(f, args...)) }
func (v vkLogger) Error(args ...any)            { v.log(slog.LevelError, fmt.Sprint(args...)) }
func (v vkLogger) Errorf(f string, args ...any) { v.log(slog.LevelError, fmt.Sprintf(f, args...)) }
func (v vkLogger) Fatal(args ...any)            { v.l.Error(fmt.Sprint(args...)); os.Exit(1) }
func (v vkLogger) Fatalf(f string, args ...any) { v.l.Error(fmt.Sprintf(f, args...)); os.Exit(1) }
func (v vkLogger) WithField(k string, val any) log.Logger {
	return vkLogger{l: v.l.With(k, val), quiet: v.quiet}
}
func (v vkLogger) WithError(err error) log.Logger {
	if err == nil {
		return v
	}
	// err.Error(), not the error: pkg/errors values print their stack under %+v.
	return vkLogger{l: v.l.With("err", err.Error()), quiet: v.quiet || errors.Is(err, errTerminating)}
}
func (v vkLogger) WithFields(f log.Fields) log.Logger {
	l := v.l
	for k, val := range f {
		l = l.With(k, val)
	}
	return vkLogger{l: l, quiet: v.quiet}
}
