package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/friendlyvm"
	"github.com/d8virt/devstack/guest/guesttest"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/testenv"
)

// The test's cluster-scoped objects have fixed names of their own; its namespace is fresh.
const (
	vmName = "cli"
	class  = "cli-e2e"
	image  = "cli-e2e-root"
)

// userData keeps printing a marker, so that a console opened at any time sees the guest is up.
const userData = `#!/bin/sh
(while true; do echo "cli-marker"; sleep 2; done) &
`

// client is the built binary under its two names, run as one user.
type client struct {
	dir, kubeconfig string
}

// run runs argv (d8v's arguments, or "kubectl" with the plugin's) with the binaries' directory
// on PATH and the user's kubeconfig in KUBECONFIG; it returns the exit code and the output.
func (c client) run(t *testing.T, ctx context.Context, argv ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.program(argv[0]), argv[1:]...)
	cmd.Env = c.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	t.Logf("%s:\n%s", strings.Join(argv, " "), out.String())
	return 0, out.String()
}

func (c client) program(name string) string {
	if name == "kubectl" {
		return filepath.Join(controlplane.BinDir(), "kubectl")
	}
	return filepath.Join(c.dir, name)
}

func (c client) env() []string {
	return append(os.Environ(), "PATH="+c.dir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.kubeconfig)
}

// TestClient drives a friendly VirtualMachine with the client as a user bound to the stock edit
// role in the VM's namespace (the chart's user roles aggregate into it): bad arguments exit 2,
// `d8v stop --wait` and `kubectl virtualization start --wait` go through VirtualMachineOperations
// and show their progress, `d8v console` types a command into the guest and reads its answer, the
// same user is refused the console in another namespace (403 with what to ask for), and
// collect-debug-info writes the machine's archive.
func TestClient(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	t.Cleanup(cancel)
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mc := moduletest.ForTest(t, ctx, moduletest.Config{Repo: repo, Net: testenv.Get(t).Net, Nodes: []string{"cli-a"}, Log: os.Stderr})
	admin := mc.Stack.KubeconfigPath()
	kubectl := func(args ...string) string { t.Helper(); return testenv.Kubectl(t, admin, args...) }
	restCfg, err := mc.Stack.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	dir := buildClient(t, ctx, repo)
	ns, other := namespace(t, ctx, kube, "cli-e2e-"), namespace(t, ctx, kube, "cli-e2e-other-")
	user := client{dir: dir, kubeconfig: editUser(t, ctx, kube, restCfg.Host, mc.Stack.CAFile(), ns)}

	t.Log("bad arguments exit 2 with what is wrong, in both forms")
	for _, argv := range [][]string{{"d8v", "stop"}, {"kubectl", "virtualization", "port-forward", vmName, "99999"}, {"d8v", "bogus"}} {
		if code, out := user.run(t, ctx, argv...); code != 2 || !strings.Contains(out, "see ") {
			t.Errorf("%v: exit %d, want 2:\n%s", argv, code, out)
		}
	}

	spec := friendlyvm.Spec{
		Name: vmName, Namespace: ns, Class: class, Disk: "root", DiskSize: "64Mi", Image: image,
		RunPolicy: "Manual", Cores: 1, CoreFraction: "100%", Memory: "128Mi",
		TerminationGracePeriodSeconds: 30, UserData: userData,
	}
	g := friendlyvm.ServeGuestFiles(t, ctx)
	apply(t, admin, "image", friendlyvm.ImageYAML(image, g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2"))))
	apply(t, admin, "vm", spec.Manifest())
	kubectl("wait", "cvi/"+image, "--for=jsonpath={.status.phase}=Ready", "--timeout=5m")
	kubectl("-n", ns, "wait", "vd/root", "--for=jsonpath={.status.phase}=Ready", "--timeout=5m")
	// runPolicy Manual: the machine may start on creation or stay stopped; either is settled
	// before the client acts.
	phase := settledPhase(t, kubectl, ns)

	if phase == "Running" {
		t.Log("d8v stop --wait stops the running machine and shows the operation's progress")
		code, out := user.run(t, ctx, "d8v", "stop", vmName, "-n", ns, "--wait", "--timeout", "5m")
		if code != 0 || !regexp.MustCompile(`(?m)^`+vmName+`-stop-\w+: Completed`).MatchString(out) || !strings.Contains(out, "Stop of VirtualMachine "+ns+"/"+vmName+" completed") {
			t.Fatalf("d8v stop --wait: exit %d\n%s", code, out)
		}
		kubectl("-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Stopped", "--timeout=2m")
	}
	t.Log("kubectl virtualization start --wait (the plugin form) starts it")
	code, out := user.run(t, ctx, "kubectl", "virtualization", "start", vmName, "-n", ns, "--wait", "--timeout", "8m")
	if code != 0 || !strings.Contains(out, "Start of VirtualMachine "+ns+"/"+vmName+" completed") {
		t.Fatalf("kubectl virtualization start --wait: exit %d\n%s", code, out)
	}
	kubectl("-n", ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Running", "--timeout=3m")
	if code, out := user.run(t, ctx, "d8v", "start", vmName, "-n", ns, "--wait"); code != 1 || !strings.Contains(out, "is not applicable for VirtualMachine in phase Running") {
		t.Errorf("start of the running machine: exit %d, want 1 with the reason:\n%s", code, out)
	}

	t.Log("d8v console types a command into the guest")
	typeIntoConsole(t, ctx, user, ns)

	t.Log("the edit user of one namespace is refused the console of another")
	if code, out := user.run(t, ctx, "d8v", "console", vmName, "-n", other); code != 1 || !strings.Contains(out, "403") || !strings.Contains(out, "ask for the verb get on virtualmachines/console") {
		t.Errorf("console in %s: exit %d, want 1 with the 403 and what to ask for:\n%s", other, code, out)
	}

	t.Log("collect-debug-info writes the machine's archive")
	archive := filepath.Join(t.TempDir(), "debug.tar.gz")
	if code, out := user.run(t, ctx, "d8v", "collect-debug-info", vmName, "-n", ns, "-o", archive); code != 0 {
		t.Errorf("collect-debug-info: exit %d\n%s", code, out)
	}
	list, err := exec.CommandContext(ctx, "tar", "tzf", archive).CombinedOutput()
	if err != nil {
		t.Fatalf("tar tzf: %v\n%s", err, list)
	}
	for _, want := range []string{"virtualmachine.yaml", "virtualmachineoperations.yaml", "virtualdisks/root.yaml", "events.yaml", "errors.txt"} {
		if !strings.Contains(string(list), want+"\n") {
			t.Errorf("the archive lacks %s:\n%s", want, list)
		}
	}
}

// typeIntoConsole runs `d8v console` with pipes for the terminal, types a shell line into the
// guest until its answer comes, then leaves with Ctrl+].
func typeIntoConsole(t *testing.T, ctx context.Context, user client, ns string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, user.program("d8v"), "console", vmName, "-n", ns)
	cmd.Env = user.env()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	con := guesttest.NewConsole(pipes{stdout, stdin})
	answer := regexp.MustCompile(`cli=\[42\]`)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		// The guest's shell may not read the first lines while it boots: type again until the
		// answer comes.
		if err := con.Write("echo cli=[$((6*7))]\n"); err != nil {
			t.Fatalf("%v; d8v console: %s", err, stderr.String())
		}
		if _, err := con.WaitFor(answer, 5*time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on the console:\n%s\nd8v console: %s", con, stderr.String())
		}
	}
	if _, err := stdin.Write([]byte{0x1d}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("d8v console after Ctrl+]: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("d8v console did not end on Ctrl+]")
	}
	if !strings.Contains(stderr.String(), "Press Ctrl+] to leave") {
		t.Errorf("d8v console said:\n%s", stderr.String())
	}
}

// pipes are the console's stdout and stdin as one connection.
type pipes struct {
	io.ReadCloser
	io.WriteCloser
}

func (p pipes) Close() error { return errors.Join(p.WriteCloser.Close(), p.ReadCloser.Close()) }

// settledPhase waits until the machine is Running or Stopped and returns which.
func settledPhase(t *testing.T, kubectl func(...string) string, ns string) string {
	t.Helper()
	deadline := time.Now().Add(8 * time.Minute)
	for {
		phase := kubectl("-n", ns, "get", "vm", vmName, "-o", "jsonpath={.status.phase}")
		if phase == "Running" || phase == "Stopped" {
			return phase
		}
		if time.Now().After(deadline) {
			t.Fatalf("VirtualMachine %s/%s still %q", ns, vmName, phase)
		}
		time.Sleep(2 * time.Second)
	}
}

// buildClient builds d8v into a directory of the test's, with kubectl-virtualization beside it
// (the same binary, as make build links it).
func buildClient(t *testing.T, ctx context.Context, repo string) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "d8v"), "./virtualization-api/cmd/d8v")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build d8v: %v\n%s", err, out)
	}
	if err := os.Symlink("d8v", filepath.Join(dir, "kubectl-virtualization")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// namespace creates a namespace that goes when the test ends.
func namespace(t *testing.T, ctx context.Context, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	n, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	return n.Name
}

// editUser is the kubeconfig of a ServiceAccount bound to the stock edit ClusterRole in ns.
func editUser(t *testing.T, ctx context.Context, kube kubernetes.Interface, server, caFile, ns string) string {
	t.Helper()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "editor"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "editor", Namespace: ns}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hours := int64(2 * 3600)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "editor", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hours}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos["editor"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["editor"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "editor", Namespace: ns}
	cfg.CurrentContext = "editor"
	path := filepath.Join(t.TempDir(), "editor.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// apply applies manifest as the admin; it is deleted when the test ends.
func apply(t *testing.T, kubeconfig, name, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Kubectl(t, kubeconfig, "apply", "-f", file)
	t.Cleanup(func() { testenv.Kubectl(t, kubeconfig, "delete", "-f", file, "--ignore-not-found", "--timeout=3m") })
}
