// Package core runs kubevirt-core on the local stack the way a cluster runs it: every component
// talks kubevirt.io through its own kube-api-rewriter, and virt-api serves from a test host behind
// a real APIService. Product code has no local mode: only flags and kubeconfigs differ.
package core

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
)

// Namespace holds the core's Service for virt-api.
const Namespace = "kubevirt"

// Options place the core next to a stack.
type Options struct {
	// BinDir has kube-api-rewriter, virt-controller and virt-api (make build puts them in bin/).
	BinDir string
	// Stack is the control plane the core runs on; its state directory keeps the core's files.
	Stack *controlplane.Stack
	// PortBase is the first of the loopback ports the core's listeners use (six in all).
	PortBase int
	// HostName names the test host that plays virt-api's pod; empty means "virt-api". Test hosts
	// are machine-wide, so stacks side by side need different ones.
	HostName string
	// Nodes are the names of the local nodes to start, each a node agent running virt-handler
	// and the launcher Pods; none means a control plane without nodes.
	Nodes []string
	// ImageStore is the containerDisk store the nodes read; empty means ImageStore().
	ImageStore string
}

// ImageStore is the machine's containerDisk store: <store>/<escaped image>/disk.qcow2.
func ImageStore() string { return filepath.Join(controlplane.CacheRoot(), "images") }

// KubeconfigPath is a kubeconfig for people: kubectl speaks kubevirt.io through a rewriter.
func KubeconfigPath(s *controlplane.Stack) string {
	return filepath.Join(s.Config().StateDir, "kubevirt.kubeconfig")
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// rewriter is a kube-api-rewriter in front of one component, with the admin's credentials.
func rewriter(o Options, name, apiAddr, healthAddr, netns string) controlplane.Component {
	c := controlplane.Component{
		Name: "rewriter-" + name,
		Bin:  filepath.Join(o.BinDir, "kube-api-rewriter"),
		Args: []string{
			"--kubeconfig", o.Stack.KubeconfigPath(),
			"--api-listen", apiAddr, "--health-listen", healthAddr, "--metrics-listen", "",
			"--log-format", "text",
		},
		NetNS: netns,
	}
	if netns == "" {
		c.Ready = controlplane.HTTPReady("http://" + healthAddr + "/readyz")
	}
	return c
}

// Components are the core's programs in start order. Building them has no side effects; each
// prepares what it needs right before it starts.
func Components(o Options) ([]controlplane.Component, error) {
	abs, err := filepath.Abs(o.BinDir)
	if err != nil {
		return nil, fmt.Errorf("bin dir: %w", err)
	}
	// The stack recognises its processes by the absolute path of their executable.
	o.BinDir = abs
	if o.HostName == "" {
		o.HostName = hostName
	}
	hostName := o.HostName
	if o.ImageStore == "" {
		o.ImageStore = ImageStore()
	}
	for _, b := range []string{"kube-api-rewriter", "virt-controller", "virt-api"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s missing in %s (run make build): %w", b, o.BinDir, err)
		}
	}
	dir := o.Stack.Config().StateDir
	n := o.Stack.Config().Net
	userAPI, userHealth := loopback(o.PortBase), loopback(o.PortBase+1)
	ctrlAPI, ctrlHealth := loopback(o.PortBase+2), loopback(o.PortBase+3)
	ctrlProbe := loopback(o.PortBase + 4)
	ctrlKubeconfig := filepath.Join(dir, "virt-controller.kubeconfig")
	apiKubeconfig := filepath.Join(dir, "virt-api.kubeconfig")
	users := rewriter(o, "users", userAPI, userHealth, "")
	users.Before = func(context.Context) error {
		return controlplane.WriteRewriterKubeconfig(KubeconfigPath(o.Stack), "http://"+userAPI)
	}

	ctrlRewriter := rewriter(o, "virt-controller", ctrlAPI, ctrlHealth, "")
	controller := controlplane.Component{
		Name: "virt-controller",
		Bin:  filepath.Join(o.BinDir, "virt-controller"),
		Args: []string{
			"--kubeconfig", ctrlKubeconfig, "--leader-elect=false",
			"--launcher-image", LauncherImage, "--container-disk-store", o.ImageStore,
			// KVM does not work here (see docs/development.md): guests run under TCG.
			"--use-emulation",
			"--metrics-bind-address", ControllerMetricsAddr(o), "--health-probe-bind-address", ctrlProbe,
		},
		Before: func(context.Context) error {
			return controlplane.WriteRewriterKubeconfig(ctrlKubeconfig, "http://"+ctrlAPI)
		},
		Ready: controlplane.HTTPReady("http://" + ctrlProbe + "/readyz"),
	}

	// virt-api and its sidecar share a test host, as a pod's containers share its network.
	netns := localnet.NetNSPrefix + hostName
	apiRewriter := rewriter(o, "virt-api", "127.0.0.1:23915", "127.0.0.1:8082", netns)
	// The sidecar also serves virt-api's admission webhooks to the apiserver, renaming each review.
	hookCert, hookKey := filepath.Join(dir, "pki", "virt-api-webhooks.crt"), filepath.Join(dir, "pki", "virt-api-webhooks.key")
	apiRewriter.Args = append(apiRewriter.Args, "--webhook-listen", ":"+strconv.Itoa(webhookPort),
		"--webhook-target", "https://127.0.0.1:9443", "--webhook-cert", hookCert, "--webhook-key", hookKey)
	apiRewriter.Before = func(context.Context) error {
		if _, err := n.AddHost(hostName); err != nil {
			return err
		}
		if _, _, err := webhookCert(o.Stack); err != nil {
			return err
		}
		return controlplane.WriteRewriterKubeconfig(apiKubeconfig, "http://127.0.0.1:23915")
	}
	certFile := filepath.Join(dir, "pki", "virt-api.crt")
	keyFile := filepath.Join(dir, "pki", "virt-api.key")
	virtAPI := controlplane.Component{
		Name:  "virt-api",
		Bin:   filepath.Join(o.BinDir, "virt-api"),
		NetNS: netns,
		Args: []string{
			"--kubeconfig", apiKubeconfig, "--listen", ":8443",
			"--tls-cert-file", certFile, "--tls-key-file", keyFile,
			// virt-api's serving certificate doubles as its client certificate for virt-handler:
			// both come from the stack's CA, which is also the handlers' CA.
			"--handler-ca-file", o.Stack.CAFile(), "--handler-client-cert-file", certFile, "--handler-client-key-file", keyFile,
			// No kube-rbac-proxy fronts it here, so it serves on the host's address.
			"--metrics-bind-address", fmt.Sprintf(":%d", APIMetricsPort),
			// Here virt-controller and virt-api act as the stack's admin, not as KubeVirt's
			// service accounts: they change VMI specs (volume hotplug) as that user.
			"--system-users", "kubernetes-admin",
		},
		Before: func(context.Context) error {
			_, _, err := o.Stack.IssueCert("virt-api", []string{"virt-api." + Namespace + ".svc"}, nil)
			return err
		},
		Ready: func(ctx context.Context) error {
			host, err := n.AddHost(hostName)
			if err != nil {
				return err
			}
			if err := register(ctx, o.Stack, host); err != nil {
				return err
			}
			return registerWebhooks(ctx, o.Stack, host)
		},
	}
	out := []controlplane.Component{users, ctrlRewriter, controller, apiRewriter, virtAPI}
	return append(out, nodeComponents(o)...), nil
}

// ControllerMetricsAddr is where virt-controller serves its metrics on the local stack.
func ControllerMetricsAddr(o Options) string { return loopback(o.PortBase + 5) }

// APIMetricsPort is virt-api's metrics port on its test host.
const APIMetricsPort = 8080

// APIMetricsURL is virt-api's metrics endpoint on its test host.
func APIMetricsURL(o Options) (string, error) {
	name := o.HostName
	if name == "" {
		name = hostName
	}
	h, err := o.Stack.Config().Net.AddHost(name)
	if err != nil {
		return "", fmt.Errorf("virt-api host: %w", err)
	}
	return fmt.Sprintf("http://%s:%d/metrics", h.IP, APIMetricsPort), nil
}

// hostName is the default test host that plays virt-api's pod.
const hostName = "virt-api"

// Down removes what the components added besides processes: the test host of virt-api.
func Down(n localnet.Net, o Options) error {
	if o.HostName == "" {
		o.HostName = hostName
	}
	return n.DeleteHost(o.HostName)
}
