package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/proc"
	"github.com/d8virt/devstack/testenv"
)

// agentProc is a node agent run as a subprocess, the way the stack runs it.
type agentProc struct {
	t       *testing.T
	name    string
	root    string
	bin     string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (a *agentProc) start() {
	a.t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.t.Fatal(err)
	}
	defer logf.Close()
	a.cmd = exec.Command(a.bin, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// The agent dies with the test binary; its pods' processes are cleaned up by the test.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := a.cmd.Start(); err != nil {
		a.t.Fatalf("start agent %s: %v", a.name, err)
	}
	a.done = make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(a.done) }()
}

// stop sends SIGTERM and waits for the agent to exit.
func (a *agentProc) stop() {
	a.t.Helper()
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		a.t.Errorf("agent %s ignored SIGTERM for 30s", a.name)
	}
	a.cmd = nil
}

func (a *agentProc) logTail() string {
	b, _ := os.ReadFile(a.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

type nodeAgentSuite struct {
	t      *testing.T
	env    *testenv.Env
	ns     string
	run    string
	agents []*agentProc
	out    string // a host directory that pods mount (hostPath)
	// pids of every container attempt seen, to prove that none outlives the test
	procs []nodeagent.RunningInfo
	uids  map[types.UID]bool
}

func (s *nodeAgentSuite) ctx() context.Context { return testenv.Context(s.t) }

func (s *nodeAgentSuite) agentOf(pod *corev1.Pod) *agentProc {
	for _, a := range s.agents {
		if a.name == pod.Spec.NodeName {
			return a
		}
	}
	s.t.Fatalf("pod %s runs on %q, not on a test node", pod.Name, pod.Spec.NodeName)
	return nil
}

func (s *nodeAgentSuite) logs() string {
	var b strings.Builder
	for _, a := range s.agents {
		fmt.Fprintf(&b, "--- agent %s:\n%s\n", a.name, a.logTail())
	}
	return b.String()
}

// create creates a pod, retrying while the namespace's service account does not exist yet.
func (s *nodeAgentSuite) create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if pod.Spec.NodeSelector == nil {
		pod.Spec.NodeSelector = map[string]string{"d8v.test/agents": s.run}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := s.env.Kube.CoreV1().Pods(s.ns).Create(s.ctx(), pod, metav1.CreateOptions{})
		if err == nil {
			s.uids[got.UID] = true
			return got
		}
		if !strings.Contains(err.Error(), "serviceaccount") || time.Now().After(deadline) {
			t.Fatalf("create pod %s: %v", pod.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPod polls a pod until ok accepts it.
func (s *nodeAgentSuite) waitPod(t *testing.T, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		p, err := s.env.Kube.CoreV1().Pods(s.ns).Get(s.ctx(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if ok(p) {
				return p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, _ := json.MarshalIndent(last, "", "  ")
	t.Fatalf("pod %s: not %s after 90s:\n%s\n%s", name, what, st, s.logs())
	return nil
}

func ctrStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func podCond(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func isReady(pod *corev1.Pod) bool {
	c := podCond(pod, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// running records the processes of a pod's containers from the agent's state files.
func (s *nodeAgentSuite) running(t *testing.T, pod *corev1.Pod, ctr string) nodeagent.RunningInfo {
	t.Helper()
	l := nodeagent.Layout{Root: s.agentOf(pod).root}
	var ri nodeagent.RunningInfo
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(l.ContainerDir(pod.UID, ctr), "running.json"))
		if err == nil && json.Unmarshal(b, &ri) == nil && ri.Pid > 0 {
			s.procs = append(s.procs, ri)
			return ri
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running.json for %s/%s: %v", pod.Name, ctr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// procAlive tells whether pid is still the process that started at ticks.
func procAlive(pid int, ticks uint64) bool {
	return proc.Identity{Pid: pid, StartTicks: ticks}.Alive()
}

func netnsExists(uid types.UID) bool {
	_, err := os.Stat("/run/netns/d8v-" + nodeagent.NetHostName(uid))
	return err == nil
}

func busybox(name string, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Command: []string{"/bin/busybox", "sh", "-c", script}}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// TestNodeAgent runs two node agents against the real control plane and real pods placed by the
// real scheduler: shared pod networking, env, downward API, configMap, secret and token volumes,
// exit codes, restarts, deletion with SIGTERM and SIGKILL, readiness gates, two nodes, and an agent
// restart that adopts running pods and reports lost ones. Nothing may be left behind.
func TestNodeAgent(t *testing.T) {
	env := testenv.Get(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("the node agent test runs busybox: %v", err)
	}
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./devstack/cmd/node-agent")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build node-agent: %v\n%s", err, out)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	s := &nodeAgentSuite{t: t, env: env, run: hex.EncodeToString(b[:]), out: t.TempDir(), uids: map[types.UID]bool{}}
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("na-%s-%d", s.run, i)
		root := filepath.Join(t.TempDir(), "root")
		a := &agentProc{t: t, name: name, root: root, bin: filepath.Join(bin, "node-agent"), logPath: filepath.Join(t.TempDir(), "agent.log")}
		a.args = []string{
			"--kubeconfig", env.Kubeconfig, "--node-name", name, "--root-dir", root, "--bin-dir", bin,
			"--image-store", filepath.Join(t.TempDir(), "images"),
			"--cpu", "4", "--memory", "8Gi", "--pods", "50",
			"--labels", fmt.Sprintf("d8v.test/agents=%s,d8v.test/index=%d", s.run, i),
		}
		s.agents = append(s.agents, a)
	}
	t.Cleanup(func() { s.teardown() })
	for _, a := range s.agents {
		a.start()
	}
	s.ns = env.Namespace(t)

	t.Run("Nodes", s.testNodes)
	t.Run("SharedNetwork", s.testSharedNetwork)
	t.Run("RequestedAddress", s.testRequestedAddress)
	t.Run("EnvVolumesToken", s.testEnvVolumesToken)
	t.Run("ProgramInPrivateDir", s.testProgramInPrivateDir)
	t.Run("ExitCodes", s.testExitCodes)
	t.Run("Restarts", s.testRestarts)
	t.Run("Deletion", s.testDeletion)
	t.Run("ReadinessGate", s.testReadinessGate)
	t.Run("NodeSelector", s.testNodeSelector)
	t.Run("AgentRestart", s.testAgentRestart)
	t.Run("Cleanup", s.testCleanup)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// leftovers describes what is left of the test's pods on this machine.
func (s *nodeAgentSuite) leftovers() string {
	var b strings.Builder
	for _, ri := range s.procs {
		if procAlive(ri.Pid, ri.StartTicks) || procAlive(ri.ShimPid, ri.ShimStartTicks) {
			fmt.Fprintf(&b, "process %d (shim %d)\n", ri.Pid, ri.ShimPid)
		}
	}
	for uid := range s.uids {
		if netnsExists(uid) {
			fmt.Fprintf(&b, "netns of pod %s\n", uid)
		}
	}
	for _, a := range s.agents {
		entries, _ := os.ReadDir(nodeagent.Layout{Root: a.root}.PodsDir())
		for _, e := range entries {
			fmt.Fprintf(&b, "pod directory %s/pods/%s\n", a.root, e.Name())
		}
	}
	return b.String()
}

// teardown stops the agents, removes whatever a failed test left, deletes the Nodes and checks
// that nothing is left.
func (s *nodeAgentSuite) teardown() {
	t := s.t
	for _, a := range s.agents {
		a.stop()
	}
	for _, a := range s.agents {
		if err := nodeagent.CleanupNode(a.root, s.env.Net, 5*time.Second); err != nil {
			t.Errorf("cleanup of %s: %v", a.name, err)
		}
		ctx := context.Background()
		if err := s.env.Kube.CoreV1().Nodes().Delete(ctx, a.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", a.name, err)
		}
		_ = s.env.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, a.name, metav1.DeleteOptions{})
	}
	if l := s.leftovers(); l != "" {
		t.Errorf("left behind after the agents stopped:\n%s", l)
	}
}
