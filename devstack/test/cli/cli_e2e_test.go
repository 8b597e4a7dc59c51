package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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
	// rwxClass keeps the machine's disk ReadWriteMany (virtualization-controller's StorageClass
	// annotation), so that it can live-migrate between the two nodes.
	rwxClass = "cli-e2e-rwx"
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

// fixture is what the package's tests share: the cluster, the client as the edit user of ns, and
// the machine vmName in ns, made with runPolicy AlwaysOff; undo are its removals, last first.
type fixture struct {
	mc        *moduletest.Cluster
	admin     string
	user      client
	ns, other string
	undo      []func() error
}

var (
	sharedOnce sync.Once
	shared     *fixture
)

// getFixture takes the fixture, setting it up in the first test that asks.
func getFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, libvirtd and QEMU")
	}
	sharedOnce.Do(func() { shared = setup(t) })
	if shared == nil {
		t.Fatal("the fixture's set-up failed in an earlier test")
	}
	return shared
}

// stopShared removes the fixture after the last test: the machine and its image, the
// namespaces, and a cluster of the package's own.
func stopShared() error {
	if shared == nil {
		return nil
	}
	var errs []error
	for i := len(shared.undo) - 1; i >= 0; i-- {
		errs = append(errs, shared.undo[i]())
	}
	return errors.Join(append(errs, shared.mc.Stop())...)
}

func setup(t *testing.T) *fixture {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// Two nodes: the machine migrates.
	mc, err := moduletest.Installed(ctx, moduletest.Config{Repo: repo, Net: testenv.Get(t).Net, Nodes: []string{"cli-a", "cli-b"}, Log: os.Stderr})
	if err != nil {
		t.Fatalf("the cluster with the module: %v", err)
	}
	f := &fixture{mc: mc, admin: mc.Stack.KubeconfigPath()}
	ok := false
	defer func() {
		if !ok {
			var b strings.Builder
			mc.Logs(&b)
			t.Log(b.String())
			if err := stopShared(); err != nil {
				t.Errorf("undo the set-up: %v", err)
			}
			shared = nil
		}
	}()
	shared = f
	restCfg, err := mc.Stack.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	// The client and the user's kubeconfig live as long as the fixture.
	dir, err := os.MkdirTemp("", "cli-e2e-client-")
	if err != nil {
		t.Fatal(err)
	}
	f.undo = append(f.undo, func() error { return os.RemoveAll(dir) })
	buildClient(t, ctx, repo, dir)
	f.ns, f.other = f.namespace(t, ctx, kube, "cli-e2e-"), f.namespace(t, ctx, kube, "cli-e2e-other-")
	f.user = client{dir: dir, kubeconfig: editUser(t, ctx, kube, restCfg.Host, mc.Stack.CAFile(), f.ns, dir)}

	spec := friendlyvm.Spec{
		Name: vmName, Namespace: f.ns, Class: class, Disk: "root", DiskSize: "64Mi", StorageClass: rwxClass, Image: image,
		RunPolicy: "AlwaysOff", Cores: 1, CoreFraction: "100%", Memory: "128Mi",
		TerminationGracePeriodSeconds: 30, UserData: userData,
	}
	// The guest's files are served while the image imports (until this first test ends).
	g := friendlyvm.ServeGuestFiles(t, ctx)
	f.apply(t, "storageclass", friendlyvm.ReadWriteManyClassYAML(rwxClass))
	f.apply(t, "image", friendlyvm.ImageYAML(image, g.HTTPSource("disk.qcow2", g.SHA256("disk.qcow2"))))
	f.apply(t, "vm", spec.Manifest())
	f.kubectl(t, "wait", "cvi/"+image, "--for=jsonpath={.status.phase}=Ready", "--timeout=5m")
	f.kubectl(t, "-n", f.ns, "wait", "vd/root", "--for=jsonpath={.status.phase}=Ready", "--timeout=5m")
	f.kubectl(t, "-n", f.ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Stopped", "--timeout=3m")
	ok = true
	return f
}

func (f *fixture) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return testenv.Kubectl(t, f.admin, args...)
}

// apply applies manifest as the admin; stopShared deletes it.
func (f *fixture) apply(t *testing.T, name, manifest string) {
	t.Helper()
	tmp, err := os.CreateTemp("", "cli-e2e-"+name+"-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := tmp.Name()
	if _, err := tmp.WriteString(manifest); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	f.kubectl(t, "apply", "-f", file)
	f.undo = append(f.undo, func() error {
		out, err := exec.Command(filepath.Join(controlplane.BinDir(), "kubectl"), "--kubeconfig", f.admin, "delete", "-f", file, "--ignore-not-found", "--timeout=3m").CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl delete -f %s: %w\n%s", file, err, out)
		}
		return os.Remove(file)
	})
}

// namespace creates a namespace that stopShared deletes.
func (f *fixture) namespace(t *testing.T, ctx context.Context, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	n, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.undo = append(f.undo, func() error {
		return kube.CoreV1().Namespaces().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
	})
	return n.Name
}

// TestClientRefusals runs the client as the edit user against the stopped machine (runPolicy
// AlwaysOff; no VM boots): bad arguments exit 2 with what is wrong, in both forms;
// `d8v start --wait` creates a VirtualMachineOperation that the controller refuses for the run
// policy, and exits 1 with its reason; `kubectl virtualization console` of the stopped machine
// exits 1 with virtualization-api's 409 and how to see the phase; the console in another
// namespace exits 1 with the 403 and what to ask for; `d8v ssh` runs the system's ssh through
// its port-forward, refused with the 409, and exits with ssh's 255; collect-debug-info writes the
// archive.
func TestClientRefusals(t *testing.T) {
	f := getFixture(t)
	ctx := testenv.Context(t)
	for _, argv := range [][]string{{"d8v", "stop"}, {"kubectl", "virtualization", "port-forward", vmName, "99999"}, {"d8v", "bogus"}} {
		if code, out := f.user.run(t, ctx, argv...); code != 2 || !strings.Contains(out, "see ") {
			t.Errorf("%v: exit %d, want 2:\n%s", argv, code, out)
		}
	}
	code, out := f.user.run(t, ctx, "d8v", "start", vmName, "-n", f.ns, "--wait", "--timeout", "2m")
	if code != 1 || !strings.Contains(out, "Operation type Start is not applicable for VirtualMachine with runPolicy AlwaysOff") || !regexp.MustCompile(`(?m)^`+vmName+`-start-\w+: Failed`).MatchString(out) {
		t.Errorf("d8v start --wait of an AlwaysOff machine: exit %d, want 1 with the progress and the reason:\n%s", code, out)
	}
	code, out = f.user.run(t, ctx, "kubectl", "virtualization", "console", vmName, "-n", f.ns)
	if code != 1 || !strings.Contains(out, "409") || !strings.Contains(out, "the phase is Stopped") || !strings.Contains(out, "kubectl get vm "+vmName+" -n "+f.ns+" shows its phase") {
		t.Errorf("kubectl virtualization console of a stopped machine: exit %d, want 1 with the 409:\n%s", code, out)
	}
	code, out = f.user.run(t, ctx, "d8v", "console", vmName, "-n", f.other)
	if code != 1 || !strings.Contains(out, "403") || !strings.Contains(out, "ask for the verb get on virtualmachines/console") {
		t.Errorf("console in %s: exit %d, want 1 with the 403 and what to ask for:\n%s", f.other, code, out)
	}
	// ssh runs with d8v port-forward --stdio as its ProxyCommand (the namespace and KUBECONFIG
	// passed on), which is refused for the stopped machine; ssh's own exit code comes back.
	code, out = f.user.run(t, ctx, "d8v", "ssh", "cloud@"+vmName, "-n", f.ns, "--", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "true")
	if code != 255 || !strings.Contains(out, "portforward/22/tcp of VirtualMachine "+f.ns+"/"+vmName+": 409") {
		t.Errorf("d8v ssh to a stopped machine: exit %d, want ssh's 255 with the port-forward's 409:\n%s", code, out)
	}
	archive := filepath.Join(t.TempDir(), "debug.tar.gz")
	if code, out := f.user.run(t, ctx, "d8v", "collect-debug-info", vmName, "-n", f.ns, "-o", archive); code != 0 {
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

// TestClientOnAGuest boots the machine with the client as the edit user:
// `kubectl virtualization start --wait` (the plugin form) starts it through a
// VirtualMachineOperation, a second start exits 1 with the controller's reason, `d8v console`
// types a command into the guest and reads the answer (reconnecting through `d8v restart
// --wait`), `d8v migrate --wait` and `d8v evict --wait` move it to the other node (its disk is
// ReadWriteMany), and `d8v stop --wait` stops it, printing the operation's progress.
func TestClientOnAGuest(t *testing.T) {
	f := getFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	f.kubectl(t, "-n", f.ns, "patch", "vm/"+vmName, "--type=merge", "-p", `{"spec":{"runPolicy":"Manual"}}`)
	t.Cleanup(func() {
		f.kubectl(t, "-n", f.ns, "patch", "vm/"+vmName, "--type=merge", "-p", `{"spec":{"runPolicy":"AlwaysOff"}}`)
	})
	// Under Manual the machine may start by itself; either way it settles first.
	if settledPhase(t, f) == "Stopped" {
		t.Log("kubectl virtualization start --wait (the plugin form) starts it")
		code, out := f.user.run(t, ctx, "kubectl", "virtualization", "start", vmName, "-n", f.ns, "--wait", "--timeout", "8m")
		if code != 0 || !strings.Contains(out, "Start of VirtualMachine "+f.ns+"/"+vmName+" completed") {
			t.Fatalf("kubectl virtualization start --wait: exit %d\n%s", code, out)
		}
	}
	f.kubectl(t, "-n", f.ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Running", "--timeout=3m")
	if code, out := f.user.run(t, ctx, "d8v", "start", vmName, "-n", f.ns, "--wait"); code != 1 || !strings.Contains(out, "is not applicable for VirtualMachine in phase Running") {
		t.Errorf("start of the running machine: exit %d, want 1 with the reason:\n%s", code, out)
	}

	t.Log("d8v console --reconnect types into the guest, and again through d8v restart --wait")
	con := startConsole(t, ctx, f.user, f.ns, "--reconnect")
	con.typeUntilAnswer(t, "first")
	code, out := f.user.run(t, ctx, "d8v", "restart", vmName, "-n", f.ns, "--wait", "--timeout", "5m")
	if code != 0 || !strings.Contains(out, "Restart of VirtualMachine "+f.ns+"/"+vmName+" completed") {
		t.Fatalf("d8v restart --wait: exit %d\n%s", code, out)
	}
	con.typeUntilAnswer(t, "after-restart")
	if said := con.leave(t); !strings.Contains(said, "reconnecting (Ctrl+] leaves)") || !strings.Contains(said, "Reconnected to the console of VirtualMachine "+f.ns+"/"+vmName) {
		t.Errorf("d8v console --reconnect said:\n%s", said)
	}

	t.Log("d8v migrate --wait and d8v evict --wait move the running machine to the other node")
	for _, op := range []struct{ command, typ string }{{"migrate", "Migrate"}, {"evict", "Evict"}} {
		from := f.kubectl(t, "-n", f.ns, "get", "vm", vmName, "-o", "jsonpath={.status.nodeName}")
		code, out := f.user.run(t, ctx, "d8v", op.command, vmName, "-n", f.ns, "--wait", "--timeout", "5m")
		if code != 0 || !strings.Contains(out, op.typ+" of VirtualMachine "+f.ns+"/"+vmName+" completed") {
			t.Fatalf("d8v %s --wait: exit %d\n%s", op.command, code, out)
		}
		var to string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			to = f.kubectl(t, "-n", f.ns, "get", "vm", vmName, "-o", "jsonpath={.status.nodeName} {.status.phase}")
			if to != from+" Running" && strings.HasSuffix(to, " Running") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after d8v %s the machine is on %q (was on %s)", op.command, to, from)
			}
		}
		t.Logf("d8v %s: %s -> %s", op.command, from, to)
	}

	t.Log("d8v stop --wait stops it and shows the operation's progress")
	code, out = f.user.run(t, ctx, "d8v", "stop", vmName, "-n", f.ns, "--wait", "--timeout", "5m")
	if code != 0 || !regexp.MustCompile(`(?m)^`+vmName+`-stop-\w+: Completed`).MatchString(out) || !strings.Contains(out, "Stop of VirtualMachine "+f.ns+"/"+vmName+" completed") {
		t.Fatalf("d8v stop --wait: exit %d\n%s", code, out)
	}
	f.kubectl(t, "-n", f.ns, "wait", "vm/"+vmName, "--for=jsonpath={.status.phase}=Stopped", "--timeout=2m")
}

// clientConsole is a running `d8v console` with pipes for the terminal.
type clientConsole struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	con    *guesttest.Console
	stderr *testenv.SyncBuffer
}

// startConsole runs `d8v console` of the machine with more flags.
func startConsole(t *testing.T, ctx context.Context, user client, ns string, flags ...string) *clientConsole {
	t.Helper()
	cmd := exec.CommandContext(ctx, user.program("d8v"), append([]string{"console", vmName, "-n", ns}, flags...)...)
	cmd.Env = user.env()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &clientConsole{cmd: cmd, stdin: stdin, stderr: &testenv.SyncBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.con = guesttest.NewConsole(pipes{stdout, stdin})
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return c
}

// typeUntilAnswer types a shell line that prints tag=[42] into the guest until its answer comes
// (the guest's shell may not read the first lines while it boots).
func (c *clientConsole) typeUntilAnswer(t *testing.T, tag string) {
	t.Helper()
	answer := regexp.MustCompile(regexp.QuoteMeta(tag) + `=\[42\]`)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if err := c.con.Write("echo " + tag + "=[$((6*7))]\n"); err != nil {
			t.Fatalf("%v; d8v console: %s", err, c.stderr)
		}
		if _, err := c.con.WaitFor(answer, 5*time.Second); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer to %s on the console:\n%s\nd8v console: %s", tag, c.con, c.stderr)
		}
	}
}

// leave presses Ctrl+], waits for the command to end and returns what it said on stderr.
func (c *clientConsole) leave(t *testing.T) string {
	t.Helper()
	if _, err := c.stdin.Write([]byte{0x1d}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("d8v console after Ctrl+]: %v\n%s", err, c.stderr)
		}
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Errorf("d8v console did not end on Ctrl+]")
	}
	said := c.stderr.String()
	if !strings.Contains(said, "Press Ctrl+] to leave") {
		t.Errorf("d8v console said:\n%s", said)
	}
	return said
}

// pipes are the console's stdout and stdin as one connection.
type pipes struct {
	io.ReadCloser
	io.WriteCloser
}

func (p pipes) Close() error { return errors.Join(p.WriteCloser.Close(), p.ReadCloser.Close()) }

// settledPhase waits until the machine is Running or Stopped and returns which.
func settledPhase(t *testing.T, f *fixture) string {
	t.Helper()
	deadline := time.Now().Add(8 * time.Minute)
	for {
		phase := f.kubectl(t, "-n", f.ns, "get", "vm", vmName, "-o", "jsonpath={.status.phase}")
		if phase == "Running" || phase == "Stopped" {
			return phase
		}
		if time.Now().After(deadline) {
			t.Fatalf("VirtualMachine %s/%s still %q", f.ns, vmName, phase)
		}
		time.Sleep(2 * time.Second)
	}
}

// buildClient builds d8v into dir, with kubectl-virtualization beside it (the same binary, as
// make build links it).
func buildClient(t *testing.T, ctx context.Context, repo, dir string) {
	t.Helper()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "d8v"), "./virtualization-api/cmd/d8v")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build d8v: %v\n%s", err, out)
	}
	if err := os.Symlink("d8v", filepath.Join(dir, "kubectl-virtualization")); err != nil {
		t.Fatal(err)
	}
}

// editUser is the kubeconfig (written into dir) of a ServiceAccount bound to the stock edit
// ClusterRole in ns.
func editUser(t *testing.T, ctx context.Context, kube kubernetes.Interface, server, caFile, ns, dir string) string {
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
	path := filepath.Join(dir, "editor.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
