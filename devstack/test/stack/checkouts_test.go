package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/proc"
	"github.com/d8virt/devstack/testenv"
)

// checkout stands for one clone of the repository: its own bin/ with devcluster, node-agent,
// service-proxy and local-provisioner (the stack starts them right after the control plane).
type checkout struct {
	t     *testing.T
	bin   string
	state string
	base  int
}

func (c checkout) devcluster(args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.bin, "devcluster"),
		append([]string{"--state-dir", c.state, "--port-base", strconv.Itoa(c.base), "--bin-dir", c.bin}, args...)...)
	cmd.Dir = filepath.Dir(c.bin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c checkout) must(args ...string) {
	c.t.Helper()
	if out, err := c.devcluster(args...); err != nil {
		c.t.Fatalf("%s: devcluster %s: %v\n%s", c.bin, strings.Join(args, " "), err, out)
	}
}

// Two checkouts share one stack, as two clones on one machine share ~/.cache/d8-virtualization:
// the second one's up starts nothing a second time, a second node agent for the node is refused
// with the name of the live one, and the second one's down stops exactly what the first one
// started, after the first was even moved: no daemon, agent or pod process is left.
func TestTwoCheckoutsOneStack(t *testing.T) {
	env := testenv.Get(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("the pod of this test runs busybox: %v", err)
	}
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	base, err := testenv.FreePortBase(env.Net)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	state := filepath.Join(root, "state")
	a := checkout{t: t, bin: filepath.Join(root, "a", "bin"), state: state, base: base}
	b := checkout{t: t, bin: filepath.Join(root, "b", "bin"), state: state, base: base}
	build := exec.Command("go", "build", "-o", a.bin+"/", "./devstack/cmd/devcluster", "./devstack/cmd/node-agent", "./devstack/cmd/local-provisioner", "./devstack/cmd/service-proxy")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build into %s: %v\n%s", a.bin, err, out)
	}
	// The second checkout's build is the same programs in another directory: a copy, not a
	// second link of four binaries.
	if err := os.CopyFS(b.bin, os.DirFS(a.bin)); err != nil {
		t.Fatalf("copy %s to %s: %v", a.bin, b.bin, err)
	}
	t.Cleanup(func() {
		if out, err := b.devcluster("down", "-purge"); err != nil {
			t.Errorf("final down: %v\n%s", err, out)
		}
	})

	const node = "n1"
	a.must("node", "up", node, "-cpu", "2", "-memory", "2Gi")
	records := stackRecords(t, state)
	agent := records["node-agent-"+node]
	if agent.Bin != filepath.Join(a.bin, "node-agent") || !agent.Alive() {
		t.Fatalf("node agent record %+v: want a live agent started from %s", agent, a.bin)
	}
	token := sleepPod(t, state, node)

	// The second checkout's up finds everything running.
	b.must("up")
	for name, rec := range stackRecords(t, state) {
		if rec != records[name] {
			t.Errorf("the second checkout's up replaced %s: %+v, was %+v", name, rec, records[name])
		}
	}
	if got := agentsOf(t, state, node); len(got) != 1 {
		t.Errorf("node %s has %d agents after the second up: %v", node, len(got), got)
	}

	// A second agent for the node, started by hand from the other checkout, is refused.
	second := exec.Command(filepath.Join(b.bin, "node-agent"), "--kubeconfig", filepath.Join(state, "admin.kubeconfig"),
		"--node-name", node, "--root-dir", filepath.Join(state, "nodes", node), "--bin-dir", b.bin, "--kubelet-port", "-1")
	done := make(chan struct{})
	var out []byte
	var secondErr error
	go func() { out, secondErr = second.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = second.Process.Kill()
		<-done
		t.Fatalf("a second agent for %s kept running:\n%s", node, out)
	}
	want := fmt.Sprintf("node %s already has a live agent (pid %d, started from %s", node, agent.Pid, agent.Bin)
	if secondErr == nil || !strings.Contains(string(out), want) {
		t.Errorf("second agent: %v, output %q; want it refused with %q", secondErr, out, want)
	}

	// The first checkout moves away; the second stops the stack it started.
	moved := filepath.Join(root, "a-moved")
	if err := os.Rename(filepath.Dir(a.bin), moved); err != nil {
		t.Fatal(err)
	}
	b.must("down")
	for name, rec := range records {
		if rec.Alive() {
			t.Errorf("%s (pid %d) still runs after the second checkout's down", name, rec.Pid)
		}
	}
	if left := stackProcesses(t, root, token); len(left) > 0 {
		t.Errorf("processes left after down:\n%s", strings.Join(left, "\n"))
	}

	// The second checkout brings the node back from its own binaries, and the pod that went with
	// the node's shutdown shows that from the first moment on, as kubelet words it.
	b.must("up")
	pod, err := stackClient(t, state).CoreV1().Pods(corev1.NamespaceDefault).Get(testenv.Context(t), "sleeper", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodFailed || pod.Status.Reason != "Terminated" || podCond(pod, corev1.DisruptionTarget) == nil || isReady(pod) {
		t.Errorf("the pod after a stack restart: phase %s, reason %q, conditions %+v; want Failed by the node's shutdown",
			pod.Status.Phase, pod.Status.Reason, pod.Status.Conditions)
	}
	if rec := stackRecords(t, state)["node-agent-"+node]; rec.Bin != filepath.Join(b.bin, "node-agent") || !rec.Alive() {
		t.Errorf("node agent after the second checkout's up: %+v, want a live agent from %s", rec, b.bin)
	}
	if got := agentsOf(t, state, node); len(got) != 1 {
		t.Errorf("node %s has %d agents after up: %v", node, len(got), got)
	}
}

// stackRecords reads the record of every daemon of the stack.
func stackRecords(t *testing.T, state string) map[string]proc.Record {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(state, "run", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]proc.Record{}
	for _, p := range paths {
		rec, err := proc.ReadRecord(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".pid")] = rec
	}
	return out
}

func stackClient(t *testing.T, state string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// sleepPod runs a pod on the node and returns what its command line carries, to find it later.
func sleepPod(t *testing.T, state, node string) string {
	t.Helper()
	kube := stackClient(t, state)
	var r [4]byte
	_, _ = rand.Read(r[:])
	token := strconv.Itoa(100000 + int(binary.BigEndian.Uint32(r[:])%900000))
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: corev1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeName:                     node,
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "sleep", Image: "busybox", Command: []string{"/bin/busybox", "sleep", token}}},
		},
	}
	ctx := testenv.Context(t)
	if _, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		p, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			return token
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod on %s not running: %v %+v", node, err, p.Status)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// cmdlines maps every process on the machine to its command line, arguments joined by spaces.
func cmdlines(t *testing.T) map[int]string {
	t.Helper()
	pids, err := proc.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && len(b) > 0 && proc.Alive(pid) {
			out[pid] = string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
		}
	}
	return out
}

// agentsOf lists the node agents (not their container shims) that run the node rooted in state.
func agentsOf(t *testing.T, state, node string) []string {
	t.Helper()
	var out []string
	for pid, cl := range cmdlines(t) {
		if strings.Contains(cl, "--root-dir "+filepath.Join(state, "nodes", node)) && !strings.Contains(cl, "container-") {
			out = append(out, fmt.Sprintf("%d: %s", pid, cl))
		}
	}
	return out
}

// stackProcesses lists the processes that belong to the test's checkouts and stack: whatever
// names a path under root, runs a binary from there, or is the test pod's command.
func stackProcesses(t *testing.T, root, token string) []string {
	t.Helper()
	var out []string
	for pid, cl := range cmdlines(t) {
		exe, _ := proc.Exe(pid)
		if pid != os.Getpid() && (strings.Contains(cl, root) || strings.HasPrefix(exe, root) || strings.Contains(cl, "sleep "+token)) {
			out = append(out, fmt.Sprintf("%d (%s): %s", pid, exe, cl))
		}
	}
	return out
}
