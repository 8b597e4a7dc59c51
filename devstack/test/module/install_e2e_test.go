// Package module installs the virtualization module from charts/virtualization with helm on a
// fresh local stack of its own, as `make run` does, and checks what a platform would: every
// component's pods Ready, each under its own ServiceAccount's token, a core VM from examples/core-vm.yaml
// booting with an answering console under the previous release and running on through the
// upgrade to this checkout's chart, helm uninstall leaving the VM alone until a reinstall
// picks it up again, and Prometheus scraping every component through kube-rbac-proxy from the
// chart's ServiceMonitors.
package module

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/release"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/console"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

const nodeName = "module-e2e"

// serviceAccounts are the accounts each component's pods must run as: the chart's for
// virt-operator, virt-operator's for the rest.
var serviceAccounts = map[string]string{
	"virt-operator":             "virt-operator",
	"dvcr":                      "dvcr",
	"virtualization-controller": "virtualization-controller",
	"virtualization-api":        "virtualization-api",
	"virt-api":                  "kubevirt-apiserver",
	"virt-controller":           "kubevirt-controller",
	"virt-handler":              "kubevirt-handler",
}

type stack struct {
	s        *controlplane.Stack
	c        *moduletest.Cluster
	opts     module.Options
	kube     kubernetes.Interface
	kubevirt string // kubeconfig through the users' rewriter
	guest    guest.Image
}

// start builds the binaries the images stand for and starts a private stack with one node and
// the users' rewriter; everything stops and is removed when the test ends.
func start(t *testing.T, ctx context.Context) *stack {
	t.Helper()
	env := testenv.Get(t)
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	store := t.TempDir()
	// The previous release's example VM boots this image from the node's image store.
	if _, err := nodeagent.ImportImage(store, "tiny-guest", img.Disk); err != nil {
		t.Fatal(err)
	}
	c, err := moduletest.Start(ctx, moduletest.Config{Repo: repo, Net: env.Net, Nodes: []string{nodeName}, ImageStore: store,
		Set: moduleValues, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.Logs(testWriter{t})
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop the stack: %v", err)
		}
	})
	kube, err := kubernetes.NewForConfig(mustConfig(t, c.Stack.KubeconfigPath()))
	if err != nil {
		t.Fatal(err)
	}
	return &stack{s: c.Stack, c: c, opts: c.Module, kube: kube, kubevirt: c.Kubevirt, guest: img}
}

func mustConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testWriter sends the install's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (st *stack) install(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := st.c.Install(ctx); err != nil {
		t.Fatal(err)
	}
}

func (st *stack) kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	return testenv.Kubectl(t, kubeconfig, args...)
}

func TestHelmInstallRunsAVM(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	st := start(t, ctx)
	if err := module.InstallMonitoringCRDs(ctx, st.opts); err != nil {
		t.Fatal(err)
	}

	// First the previous release, which the VM starts under, then an upgrade to this checkout's
	// chart; a checkout without the release's commit in its history installs this one directly.
	example := filepath.Join(st.opts.Repo, "examples", "core-vm.yaml")
	prev, err := release.Prepare(ctx, st.opts.Repo, release.Previous)
	upgrade := err == nil
	switch {
	case errors.Is(err, release.ErrNotInHistory):
		t.Logf("the upgrade from the previous release is not tested here: %v", err)
		t.Log("helm upgrade --install with devstack/chart-values/local.yaml; examples/core-vm.yaml boots the tiny guest pushed into DVCR (make image-import)")
		st.install(t, ctx)
		if _, err := module.PushContainerDisk(ctx, st.s, "tiny-guest", st.guest.Disk); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatal(err)
	default:
		t.Logf("helm install of the previous release %s, and its example VM", prev.Version)
		if err := st.c.InstallRelease(ctx, prev); err != nil {
			t.Fatal(err)
		}
		example = filepath.Join(prev.Src, prev.CoreExample)
	}
	st.kubectl(t, st.kubevirt, "apply", "-f", example)
	st.kubectl(t, st.kubevirt, "wait", "vm/demo", "--for=jsonpath={.status.printableStatus}=Running", "--timeout=3m")
	vmiUID := st.kubectl(t, st.kubevirt, "get", "vmi/demo", "-o", "jsonpath={.metadata.uid}")
	con := openConsole(t, ctx, st.kubevirt, "demo")
	if _, err := con.WaitFor(regexp.MustCompile(`hello from demo`), 90*time.Second); err != nil {
		t.Fatalf("%v\nconsole so far:\n%s", err, con)
	}
	_ = con.Close()
	if upgrade {
		launcher := launcherPod(t, ctx, st, vmiUID)
		t.Log("helm upgrade to this checkout's chart with devstack/chart-values/local.yaml keeps the VM running")
		st.install(t, ctx)
		checkStillRunning(t, ctx, st, vmiUID, launcher)
	}

	checkServiceAccounts(t, ctx, st)
	checkDVCR(t, ctx, st)
	checkClusterVirtualImage(t, st)
	checkIPAM(t, st)
	checkVirtualMachine(t, ctx, st)
	checkImageImports(t, ctx, st)
	checkVirtualMachineFromImage(t, ctx, st)

	t.Log("helm uninstall leaves the KubeVirt resource, the VM and its VMI")
	if err := module.Uninstall(ctx, st.opts); err != nil {
		t.Fatal(err)
	}
	if out := st.kubectl(t, st.s.KubeconfigPath(), "-n", module.Namespace, "get", "deployments", "-o", "name"); strings.Contains(out, "virt-operator") {
		t.Fatalf("virt-operator is still there after helm uninstall:\n%s", out)
	}
	st.kubectl(t, st.s.KubeconfigPath(), "-n", module.Namespace, "get", "internalvirtualizationkubevirts", "kubevirt")
	if got := st.kubectl(t, st.kubevirt, "get", "vm/demo", "-o", "jsonpath={.status.printableStatus}"); got != "Running" {
		t.Fatalf("VM after helm uninstall: %s", got)
	}
	if got := st.kubectl(t, st.kubevirt, "get", "vmi/demo", "-o", "jsonpath={.metadata.uid}"); got != vmiUID {
		t.Fatalf("VMI after helm uninstall: uid %q, was %q", got, vmiUID)
	}

	t.Log("a reinstall adopts the KubeVirt resource and the running VM")
	st.install(t, ctx)
	st.kubectl(t, st.kubevirt, "wait", "vm/demo", "--for=jsonpath={.status.printableStatus}=Running", "--timeout=1m")
	if got := st.kubectl(t, st.kubevirt, "get", "vmi/demo", "-o", "jsonpath={.metadata.uid}"); got != vmiUID {
		t.Fatalf("VMI after the reinstall: uid %q, was %q", got, vmiUID)
	}
	checkConsoleAnswers(t, ctx, st, "demo")

	t.Log("Prometheus scrapes the module from the chart's ServiceMonitors, the VM running")
	checkPrometheus(t, ctx, st)

	checkUpgrades(t, ctx, st, vmiUID)
}

// checkServiceAccounts checks that every component's pods name their own account and that the
// token the node agent put in the pod, which its processes use, authenticates as that account.
func checkServiceAccounts(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range pods.Items {
		var comp string
		for c := range serviceAccounts {
			if strings.HasPrefix(p.Name, c+"-") {
				comp = c
			}
		}
		if comp == "" || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			// A Pod of the rollout before, on its way out (its volumes may be gone already), or
			// one not started yet.
			continue
		}
		seen[comp] = true
		if p.Spec.ServiceAccountName != serviceAccounts[comp] {
			t.Errorf("pod %s runs as %q, want %q", p.Name, p.Spec.ServiceAccountName, serviceAccounts[comp])
			continue
		}
		tokens, _ := filepath.Glob(filepath.Join(st.s.Config().StateDir, "nodes", nodeName, "pods", string(p.UID),
			"volumes", "kubernetes.io~projected", "*", "token"))
		if len(tokens) == 0 {
			t.Errorf("pod %s has no projected service-account token", p.Name)
			continue
		}
		for _, f := range tokens {
			tok, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rev, err := st.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
				Spec: authenticationv1.TokenReviewSpec{Token: string(tok)},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := "system:serviceaccount:" + module.Namespace + ":" + serviceAccounts[comp]
			if !rev.Status.Authenticated || rev.Status.User.Username != want {
				t.Errorf("pod %s: its token authenticates as %q (authenticated %v), want %s", p.Name, rev.Status.User.Username, rev.Status.Authenticated, want)
			}
		}
	}
	for c := range serviceAccounts {
		if !seen[c] {
			t.Errorf("no %s pod", c)
		}
	}
}

func openConsole(t *testing.T, ctx context.Context, kubevirt, vm string) *guesttest.Console {
	t.Helper()
	cfg := mustConfig(t, kubevirt)
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := console.Open(ctx, cfg, "default", vm, "console")
		if err == nil {
			con := guesttest.NewConsole(conn)
			t.Cleanup(func() { _ = con.Close() })
			return con
		}
		if time.Now().After(deadline) {
			t.Fatalf("open the console: %v", err)
		}
		time.Sleep(time.Second)
	}
}
