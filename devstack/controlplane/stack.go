// Package controlplane runs a real Kubernetes control plane on this machine: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler, built from source by hack/build-k8s.sh. It writes the
// PKI (serving, service-account and front-proxy certificates) and an admin kubeconfig, starts every
// daemon detached with a pid file and a log file, and stops them again by pid.
//
// Ports and the state directory are configuration, so that several stacks can run side by side.
package controlplane

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/d8virt/devstack/filelock"
	"github.com/d8virt/devstack/localnet"
)

// Config says where a stack keeps its state, which binaries it runs and on which ports.
type Config struct {
	// StateDir holds the PKI, kubeconfigs, etcd data, pid files and logs.
	StateDir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	BinDir string
	// PortBase is etcd's client port; the peer, controller-manager, apiserver and scheduler ports
	// follow it in that order.
	PortBase int
	// Net is the local network whose bridge address the apiserver advertises.
	Net localnet.Net
	// ServiceCIDR is the range of Service cluster IPs; the default is DefaultServiceCIDR of the
	// port base, so that stacks side by side never share one.
	ServiceCIDR string
	// Log receives progress lines; nil means silence.
	Log io.Writer
	// Components are the module's own programs, started in order after the control plane is
	// ready and stopped before it.
	Components []Component
}

// Component is a long-running program that the stack runs next to the control plane, like the
// pods of a node would. The control plane's own daemons are Components too; each is tracked by a
// pid file so that a later command finds it.
type Component struct {
	Name string
	// Bin is the absolute path of the program.
	Bin  string
	Args []string
	// NetNS, when set, runs the program inside that network namespace (a test host).
	NetNS string
	// Before, when set, runs before each start: it writes what the program reads, such as
	// certificates and kubeconfigs.
	Before func(ctx context.Context) error
	// Ready, when set, tells that the program serves; Up waits for it.
	Ready func(ctx context.Context) error
}

// Ports derived from PortBase.
func (c Config) EtcdPort() int       { return c.PortBase }
func (c Config) EtcdPeerPort() int   { return c.PortBase + 1 }
func (c Config) ControllerPort() int { return c.PortBase + 2 }
func (c Config) APIServerPort() int  { return c.PortBase + 3 }
func (c Config) SchedulerPort() int  { return c.PortBase + 4 }

// Stack is a configured control plane; it holds no state of its own beyond the state directory.
type Stack struct {
	cfg Config

	mu    sync.Mutex
	exits map[string]string // exit status of daemons this process started, by name
}

// New validates cfg and fills in defaults.
func New(cfg Config) (*Stack, error) {
	if cfg.StateDir == "" || cfg.BinDir == "" {
		return nil, errors.New("stack: StateDir and BinDir are required")
	}
	if cfg.PortBase <= 0 || cfg.PortBase+4 > 65535 {
		return nil, fmt.Errorf("stack: port base %d out of range", cfg.PortBase)
	}
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = DefaultServiceCIDR(cfg.PortBase).String()
	}
	if _, err := netip.ParsePrefix(cfg.ServiceCIDR); err != nil {
		return nil, fmt.Errorf("stack: service CIDR: %w", err)
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("stack: state dir: %w", err)
	}
	cfg.StateDir = abs
	return &Stack{cfg: cfg, exits: map[string]string{}}, nil
}

// AddComponents appends programs to run after the control plane; see Config.Components.
func (s *Stack) AddComponents(cs ...Component) { s.cfg.Components = append(s.cfg.Components, cs...) }

// Config returns the effective configuration.
func (s *Stack) Config() Config { return s.cfg }

// IssueCert writes a certificate signed by the cluster CA into the stack's PKI (once) and returns
// the certificate and key files: serving certificates for the module's servers, also good as client
// certificates where two of them authenticate each other (virt-api and virt-handler).
func (s *Stack) IssueCert(name string, dnsNames []string, ips []net.IP) (certFile, keyFile string, err error) {
	spec := certSpec{name: name, signer: "ca", cn: dnsNames[0], dnsNames: dnsNames, ips: ips,
		usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	if err := ensurePKI(filepath.Join(s.cfg.StateDir, "pki"), append(s.certSpecs()[:1], spec)); err != nil {
		return "", "", err
	}
	return s.pki(name + ".crt"), s.pki(name + ".key"), nil
}

// CAFile is the cluster CA certificate, which also signs IssueCert's certificates.
func (s *Stack) CAFile() string { return s.pki("ca.crt") }

// KubeconfigPath is the admin kubeconfig (user kubernetes-admin in system:masters).
func (s *Stack) KubeconfigPath() string { return filepath.Join(s.cfg.StateDir, "admin.kubeconfig") }

// Server is the apiserver's URL on the bridge address.
func (s *Stack) Server() string {
	return "https://" + net.JoinHostPort(s.cfg.Net.GatewayIP().String(), strconv.Itoa(s.cfg.APIServerPort()))
}

func (s *Stack) pki(name string) string { return filepath.Join(s.cfg.StateDir, "pki", name) }

func (s *Stack) logf(format string, args ...any) {
	if s.cfg.Log != nil {
		fmt.Fprintf(s.cfg.Log, "[stack %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// processes lists the control plane daemons in start order, then the components.
func (s *Stack) processes() []Component {
	bin := func(n string) string { return filepath.Join(s.cfg.BinDir, n) }
	etcd := "http://127.0.0.1:" + strconv.Itoa(s.cfg.EtcdPort())
	peer := "http://127.0.0.1:" + strconv.Itoa(s.cfg.EtcdPeerPort())
	gw := s.cfg.Net.GatewayIP().String()
	authn := []string{
		"--authentication-kubeconfig=" + s.kubeconfig("controller-manager"),
		"--authorization-kubeconfig=" + s.kubeconfig("controller-manager"),
	}
	ps := []Component{
		{Name: "etcd", Bin: bin("etcd"), Args: []string{
			"--name=default",
			"--data-dir=" + filepath.Join(s.cfg.StateDir, "etcd"),
			"--listen-client-urls=" + etcd, "--advertise-client-urls=" + etcd,
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer,
			// A throwaway development store: durability on power loss is not worth the latency.
			"--unsafe-no-fsync",
			"--log-level=warn",
		}},
		{Name: "kube-apiserver", Bin: bin("kube-apiserver"), Args: []string{
			"--etcd-servers=" + etcd,
			"--advertise-address=" + gw,
			"--bind-address=" + gw,
			"--secure-port=" + strconv.Itoa(s.cfg.APIServerPort()),
			"--tls-cert-file=" + s.pki("apiserver.crt"), "--tls-private-key-file=" + s.pki("apiserver.key"),
			"--client-ca-file=" + s.pki("ca.crt"),
			"--service-account-key-file=" + s.pki("sa.pub"),
			"--service-account-signing-key-file=" + s.pki("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-cluster-ip-range=" + s.cfg.ServiceCIDR,
			"--authorization-mode=Node,RBAC",
			"--allow-privileged=true",
			// Aggregated APIs and webhooks: there is no kube-proxy, so route to endpoint IPs.
			"--enable-aggregator-routing=true",
			"--requestheader-client-ca-file=" + s.pki("front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + s.pki("front-proxy-client.crt"),
			"--proxy-client-key-file=" + s.pki("front-proxy-client.key"),
			"--profiling=false",
		}},
		{Name: "kube-controller-manager", Bin: bin("kube-controller-manager"), Args: append([]string{
			"--kubeconfig=" + s.kubeconfig("controller-manager"),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(s.cfg.ControllerPort()),
			"--root-ca-file=" + s.pki("ca.crt"),
			"--service-account-private-key-file=" + s.pki("sa.key"),
			"--cluster-signing-cert-file=" + s.pki("ca.crt"),
			"--cluster-signing-key-file=" + s.pki("ca.key"),
			"--use-service-account-credentials=true",
			"--service-cluster-ip-range=" + s.cfg.ServiceCIDR,
			"--leader-elect=false",
			"--profiling=false",
		}, authn...)},
		{Name: "kube-scheduler", Bin: bin("kube-scheduler"), Args: []string{
			"--kubeconfig=" + s.kubeconfig("scheduler"),
			"--authentication-kubeconfig=" + s.kubeconfig("scheduler"),
			"--authorization-kubeconfig=" + s.kubeconfig("scheduler"),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(s.cfg.SchedulerPort()),
			"--leader-elect=false",
			"--profiling=false",
		}},
	}
	return append(ps, s.cfg.Components...)
}

func (s *Stack) certSpecs() []certSpec {
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return []certSpec{
		{name: "ca", cn: "d8v-local-ca"},
		{name: "front-proxy-ca", cn: "d8v-front-proxy-ca"},
		{name: "apiserver", signer: "ca", cn: "kube-apiserver",
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips:      []net.IP{net.ParseIP("127.0.0.1"), net.IP(s.cfg.Net.GatewayIP().AsSlice()), firstServiceIP(s.cfg.ServiceCIDR)},
			usage:    []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{name: "admin", signer: "ca", cn: "kubernetes-admin", orgs: []string{"system:masters"}, usage: client},
		{name: "controller-manager", signer: "ca", cn: "system:kube-controller-manager", usage: client},
		{name: "scheduler", signer: "ca", cn: "system:kube-scheduler", usage: client},
		{name: "front-proxy-client", signer: "front-proxy-ca", cn: "front-proxy-client", usage: client},
	}
}

func firstServiceIP(cidr string) net.IP {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
}

func (s *Stack) kubeconfig(user string) string {
	if user == "admin" {
		return s.KubeconfigPath()
	}
	return filepath.Join(s.cfg.StateDir, user+".kubeconfig")
}

func (s *Stack) writeKubeconfigs() error {
	ca, err := os.ReadFile(s.pki("ca.crt"))
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	for _, user := range []string{"admin", "controller-manager", "scheduler"} {
		cert, err := os.ReadFile(s.pki(user + ".crt"))
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", user, err)
		}
		key, err := os.ReadFile(s.pki(user + ".key"))
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", user, err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: s.Server(), CertificateAuthorityData: ca}
		cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
		cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user, Namespace: "default"}
		cfg.CurrentContext = "local"
		if err := clientcmd.WriteToFile(*cfg, s.kubeconfig(user)); err != nil {
			return fmt.Errorf("write kubeconfig %s: %w", user, err)
		}
	}
	return nil
}

// WriteRewriterKubeconfig points clients at a kube-api-rewriter's api listener, which needs no
// credentials: it sends its own upstream.
func WriteRewriterKubeconfig(path, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["rewriter"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["rewriter"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["rewriter"] = &clientcmdapi.Context{Cluster: "rewriter", AuthInfo: "rewriter", Namespace: "default"}
	cfg.CurrentContext = "rewriter"
	return clientcmd.WriteToFile(*cfg, path)
}

// lock serialises up and down of one stack.
func (s *Stack) lock() (func(), error) { return filelock.Lock(filepath.Join(s.cfg.StateDir, ".lock")) }

// Up starts whatever part of the stack is not running and waits until the apiserver is ready and
// the default namespaces and service account exist. Calling it on a running stack changes nothing.
func (s *Stack) Up(ctx context.Context) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(s.cfg.BinDir, b)); err != nil {
			return fmt.Errorf("binary %s missing in %s (run hack/build-k8s.sh): %w", b, s.cfg.BinDir, err)
		}
	}
	if err := s.cfg.Net.Ensure(); err != nil {
		return fmt.Errorf("local network: %w", err)
	}
	if err := ensurePKI(filepath.Join(s.cfg.StateDir, "pki"), s.certSpecs()); err != nil {
		return err
	}
	if err := ensureServiceAccountKey(filepath.Join(s.cfg.StateDir, "pki")); err != nil {
		return err
	}
	if err := s.writeKubeconfigs(); err != nil {
		return err
	}
	core := len(s.processes()) - len(s.cfg.Components)
	for i, p := range s.processes() {
		if i == core {
			// The module's programs expect a bootstrapped cluster.
			if err := s.waitBootstrapped(ctx); err != nil {
				return err
			}
		}
		if rec, ok := s.running(p); ok {
			s.logf("%s already running (pid %d, started from %s)", p.Name, rec.Pid, rec.Bin)
			continue
		}
		if err := s.checkPortFree(p); err != nil {
			return err
		}
		if p.Before != nil {
			if err := p.Before(ctx); err != nil {
				return fmt.Errorf("prepare %s: %w", p.Name, err)
			}
		}
		s.logf("starting %s, log in %s", p.Name, s.logFile(p.Name))
		if err := s.start(p); err != nil {
			return err
		}
		if err := s.waitStarted(ctx, p); err != nil {
			return fmt.Errorf("%w\n--- last lines of %s:\n%s", err, s.logFile(p.Name), s.tail(p.Name, 20))
		}
	}
	return s.waitBootstrapped(ctx)
}

// checkPortFree turns "address already in use", which the daemon would only log, into an error.
func (s *Stack) checkPortFree(p Component) error {
	ports := map[string][]string{
		"etcd":                    {"127.0.0.1:" + strconv.Itoa(s.cfg.EtcdPort()), "127.0.0.1:" + strconv.Itoa(s.cfg.EtcdPeerPort())},
		"kube-apiserver":          {net.JoinHostPort(s.cfg.Net.GatewayIP().String(), strconv.Itoa(s.cfg.APIServerPort()))},
		"kube-controller-manager": {"127.0.0.1:" + strconv.Itoa(s.cfg.ControllerPort())},
		"kube-scheduler":          {"127.0.0.1:" + strconv.Itoa(s.cfg.SchedulerPort())},
	}
	for _, addr := range ports[p.Name] {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s cannot start: %s is taken (another stack? choose another port base): %w", p.Name, addr, err)
		}
		ln.Close()
	}
	return nil
}

func (s *Stack) waitStarted(ctx context.Context, p Component) error {
	switch p.Name {
	case "etcd":
		url := "http://127.0.0.1:" + strconv.Itoa(s.cfg.EtcdPort()) + "/health"
		return s.poll(ctx, p, 60*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("etcd health: %s", resp.Status)
			}
			return nil
		})
	case "kube-apiserver":
		return s.poll(ctx, p, 120*time.Second, func() error { return s.Ready(ctx) })
	}
	if p.Ready != nil {
		return s.poll(ctx, p, 60*time.Second, func() error { return p.Ready(ctx) })
	}
	// Give the daemon a moment to fail on bad flags, so the error surfaces here.
	return s.poll(ctx, p, 2*time.Second, func() error { time.Sleep(time.Second); return nil })
}

func (s *Stack) poll(ctx context.Context, p Component, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if _, ok := s.running(p); !ok {
			time.Sleep(100 * time.Millisecond) // let the reaper record the exit status
			s.mu.Lock()
			status := s.exits[p.Name]
			s.mu.Unlock()
			return fmt.Errorf("%s exited during start-up (%s)", p.Name, status)
		}
		if last = check(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", p.Name, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// RESTConfig returns the admin client configuration.
func (s *Stack) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", s.KubeconfigPath(), err)
	}
	return cfg, nil
}

// Ready reports whether the apiserver answers /readyz with ok.
func (s *Stack) Ready(ctx context.Context) error {
	cfg, err := s.RESTConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("readyz: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("readyz: %q", body)
	}
	return nil
}

// waitBootstrapped waits for what the apiserver and the controller-manager create on their own,
// so that a caller can create pods in "default" right away.
func (s *Stack) waitBootstrapped(ctx context.Context) error {
	cfg, err := s.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := func() error {
			for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
				if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
					return fmt.Errorf("namespace %s: %w", ns, err)
				}
			}
			_, err := cs.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("service account default/default not created yet (is kube-controller-manager up?)")
			}
			return err
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("control plane did not bootstrap: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Running reports whether every daemon of the stack is alive.
func (s *Stack) Running() bool {
	for _, p := range s.processes() {
		if _, ok := s.running(p); !ok {
			return false
		}
	}
	return true
}

// Status lists each daemon with its pid, or 0 when it is not running.
func (s *Stack) Status() map[string]int {
	st := map[string]int{}
	for _, p := range s.processes() {
		rec, _ := s.running(p)
		st[p.Name] = rec.Pid
	}
	return st
}

// StopComponents stops the components (Config.Components) in reverse start order and leaves the
// control plane running, so that a caller can still tell the apiserver what that stopped.
func (s *Stack) StopComponents() error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return s.stopAll(s.cfg.Components)
}

// Down stops every daemon in reverse start order. With purge it also deletes the state directory,
// etcd data included.
func (s *Stack) Down(purge bool) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	errs := []error{s.stopAll(s.processes())}
	unlock()
	if err := os.Remove(filepath.Join(s.cfg.StateDir, ".lock")); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove stack lock: %w", err))
	}
	if purge {
		if err := os.RemoveAll(s.cfg.StateDir); err != nil {
			errs = append(errs, fmt.Errorf("purge %s: %w", s.cfg.StateDir, err))
		}
	}
	return errors.Join(errs...)
}

// stopAll stops ps in reverse order.
func (s *Stack) stopAll(ps []Component) error {
	var errs []error
	for i := len(ps) - 1; i >= 0; i-- {
		if rec, ok := s.running(ps[i]); ok {
			s.logf("stopping %s (pid %d, started from %s)", ps[i].Name, rec.Pid, rec.Bin)
		}
		errs = append(errs, s.stop(ps[i], 15*time.Second))
	}
	return errors.Join(errs...)
}
