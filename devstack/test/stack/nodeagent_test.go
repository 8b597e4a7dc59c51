package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

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
	t.Run("EnvVolumesToken", s.testEnvVolumesToken)
	t.Run("ExitCodes", s.testExitCodes)
	t.Run("Restarts", s.testRestarts)
	t.Run("Deletion", s.testDeletion)
	t.Run("ReadinessGate", s.testReadinessGate)
	t.Run("NodeSelector", s.testNodeSelector)
	t.Run("AgentRestart", s.testAgentRestart)
	t.Run("Cleanup", s.testCleanup)
}

func (s *nodeAgentSuite) testNodes(t *testing.T) {
	ctx := s.ctx()
	for _, a := range s.agents {
		var n *corev1.Node
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := s.env.Kube.CoreV1().Nodes().Get(ctx, a.name, metav1.GetOptions{})
			ready := false
			if err == nil {
				for _, c := range got.Status.Conditions {
					ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
				}
			}
			// The node lifecycle controller drops its not-ready taint once the node is Ready.
			if ready && len(got.Spec.Taints) == 0 {
				n = got
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s not Ready and untainted: %v %+v\n%s", a.name, err, got, s.logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
		for k, v := range map[string]string{
			"kubernetes.io/hostname": a.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "d8v.test/agents": s.run,
		} {
			if n.Labels[k] != v {
				t.Errorf("node %s label %s=%q, want %q", a.name, k, n.Labels[k], v)
			}
		}
		for r, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "8Gi", corev1.ResourcePods: "50"} {
			if q := n.Status.Allocatable[r]; q.Cmp(resource.MustParse(want)) != 0 {
				t.Errorf("node %s allocatable %s = %s, want %s", a.name, r, q.String(), want)
			}
		}
		internal := ""
		for _, addr := range n.Status.Addresses {
			if addr.Type == corev1.NodeInternalIP {
				internal = addr.Address
			}
		}
		if internal != s.env.Net.GatewayIP().String() {
			t.Errorf("node %s InternalIP %q", a.name, internal)
		}
		lease, err := s.env.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, a.name, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != a.name ||
			lease.Spec.RenewTime == nil || time.Since(lease.Spec.RenewTime.Time) > time.Minute {
			t.Errorf("node %s lease: %+v %v", a.name, lease, err)
		}
	}
}

// An init container fills an emptyDir that httpd serves; a second container reaches httpd on
// localhost (one network namespace per pod) and leaves what it got in another emptyDir, which the
// test reads at kubelet's path; the host reaches the pod at its IP.
func (s *nodeAgentSuite) testSharedNetwork(t *testing.T) {
	empty := func(n string) corev1.Volume {
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	init := busybox("index", "echo served-by-$(POD_NAME) > /www/index.html")
	init.Env = []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name")}
	init.VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}
	httpd := corev1.Container{Name: "httpd", Image: "registry.example/busybox:1", Command: []string{"/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"},
		VolumeMounts: []corev1.VolumeMount{{Name: "www", MountPath: "/www", ReadOnly: true}},
		Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/index.html", Port: intstr.FromString("http")}}},
	}
	client := busybox("client", "until wget -q -O /shared/got http://localhost:8080/index.html; do sleep 0.2; done; exec sleep 100000")
	client.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{init},
			Containers:     []corev1.Container{httpd, client},
			Volumes:        []corev1.Volume{empty("www"), empty("shared")},
		},
	})
	pod := s.waitPod(t, "web", "Ready", isReady)
	if pod.Spec.NodeName == "" || pod.Status.PodIP == "" || pod.Status.PodIP == s.env.Net.GatewayIP().String() {
		t.Fatalf("pod placed on %q with IP %q", pod.Spec.NodeName, pod.Status.PodIP)
	}
	if !s.env.Net.Subnet.Contains(mustAddr(t, pod.Status.PodIP)) || pod.Status.HostIP != s.env.Net.GatewayIP().String() {
		t.Errorf("pod IP %s / host IP %s outside the local network", pod.Status.PodIP, pod.Status.HostIP)
	}
	if st := ctrStatus(pod, "index"); st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 || st.State.Terminated.Reason != "Completed" {
		t.Errorf("init container status %+v", st)
	}
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if pc := podCond(pod, c); pc == nil || pc.Status != corev1.ConditionTrue {
			t.Errorf("condition %s: %+v", c, pc)
		}
	}
	if pod.Status.StartTime == nil {
		t.Error("no startTime")
	}
	s.running(t, pod, "httpd")
	s.running(t, pod, "client")

	// From the host, at the pod's own address.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/index.html")
	if err != nil {
		t.Fatalf("GET from the host: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(body)) != "served-by-web" {
		t.Errorf("host got %q", body)
	}
	// From the second container, over localhost, into an emptyDir where virt-handler would look.
	got := filepath.Join(nodeagent.Layout{Root: s.agentOf(pod).root}.EmptyDirPath(pod.UID, "shared"), "got")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(got)
		if err == nil && strings.TrimSpace(string(b)) == "served-by-web" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q %v", got, b, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !netnsExists(pod.UID) {
		t.Error("the pod's network namespace is not there")
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Environment, downward API, configMap, secret, hostPath and the service-account token, which the
// container uses to GET its own pod from the apiserver; private /tmp and /run/libvirt, seeded
// /etc/libvirt.
func (s *nodeAgentSuite) testEnvVolumesToken(t *testing.T) {
	ctx := s.ctx()
	kube := s.env.Kube
	if _, err := kube.CoreV1().ConfigMaps(s.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"greeting": "hello", "mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(s.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(s.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "read-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-pods"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: s.ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(s.out, "env")
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	script := `set -e
env | sort > /out/env
cat /etc/cfg/greeting > /out/cfg
cat /etc/sec/password > /out/sec
cat /etc/info/labels > /out/labels
hostname > /out/hostname
if touch /etc/sec/x 2>/dev/null; then echo writable > /out/ro; else echo readonly > /out/ro; fi
SA=/var/run/secrets/kubernetes.io/serviceaccount
cat $SA/namespace > /out/sa-namespace
cat $SA/ca.crt > /out/ca.crt
wget -q -O /out/self --no-check-certificate --header "Authorization: Bearer $(cat $SA/token)" \
  https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$POD_NS/pods/$POD_NAME
echo private > /tmp/d8v-private-$POD_UID
mkdir -p /run/libvirt && echo mine > /run/libvirt/d8v-$POD_UID
ls -A /etc/libvirt > /out/etc-libvirt || true
echo "args: $1 $2"
echo all done`
	c := busybox("main", script)
	c.Args = []string{"sh", "$(GREETING)-arg", "$(UNDEFINED_VAR)"}
	c.Env = []corev1.EnvVar{
		fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NS", "metadata.namespace"), fieldEnv("POD_UID", "metadata.uid"),
		fieldEnv("POD_IP", "status.podIP"), fieldEnv("HOST_IP", "status.hostIP"), fieldEnv("NODE", "spec.nodeName"),
		fieldEnv("SA_NAME", "spec.serviceAccountName"), fieldEnv("APP", "metadata.labels['app']"),
		{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "greeting"}}},
		{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
		{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		{Name: "COMBINED", Value: "$(GREETING)-$(POD_NAME)"},
	}
	c.EnvFrom = []corev1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec", ReadOnly: true},
		{Name: "info", MountPath: "/etc/info"}, {Name: "out", MountPath: "/out"},
	}
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "env", Labels: map[string]string{"app": "envtest"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{c},
			Volumes: []corev1.Volume{
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
				// The test's directory is in /tmp, which the container sees privately: the hostPath
				// must still be the host's directory.
				{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out, Type: &dirOrCreate}}},
			},
		},
	})
	pod := s.waitPod(t, "env", "Succeeded", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	logFile := nodeagent.Layout{Root: s.agentOf(pod).root}.LogFile(pod.UID, "main")
	logs, _ := os.ReadFile(logFile)
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod %s: %+v\nlog:\n%s", pod.Status.Phase, pod.Status.ContainerStatuses, logs)
	}
	if st := ctrStatus(pod, "main"); st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 || st.State.Terminated.Reason != "Completed" || st.Ready {
		t.Errorf("container status %+v", st)
	}
	if !strings.Contains(string(logs), "all done") || !strings.Contains(string(logs), "args: hello-arg $(UNDEFINED_VAR)") {
		t.Errorf("log %s:\n%s", logFile, logs)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Errorf("container output %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	envOut := "\n" + read("env") + "\n"
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.env.Config.Host, "https://"))
	for _, want := range []string{
		"POD_NAME=env", "POD_NS=" + s.ns, "POD_UID=" + string(pod.UID), "POD_IP=" + pod.Status.PodIP,
		"HOST_IP=" + s.env.Net.GatewayIP().String(), "NODE=" + pod.Spec.NodeName, "SA_NAME=default", "APP=envtest",
		"GREETING=hello", "PASSWORD=s3cret", "MEM_MI=64", "COMBINED=hello-env", "CM_mode=fast", "CM_greeting=hello",
		"KUBERNETES_SERVICE_HOST=" + s.env.Net.GatewayIP().String(), "KUBERNETES_SERVICE_PORT=" + port,
	} {
		if !strings.Contains(envOut, "\n"+want+"\n") {
			t.Errorf("env lacks %s:%s", want, envOut)
		}
	}
	for file, want := range map[string]string{
		"cfg": "hello", "sec": "s3cret", "labels": `app="envtest"`, "hostname": "env", "ro": "readonly", "sa-namespace": s.ns,
	} {
		if got := read(file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if got := read("ca.crt"); got != strings.TrimSpace(string(s.env.Config.CAData)) {
		t.Errorf("ca.crt is not the cluster CA:\n%s", got)
	}
	var self corev1.Pod
	if err := json.Unmarshal([]byte(read("self")), &self); err != nil || self.UID != pod.UID {
		t.Errorf("the pod's GET of itself with its token: uid %q, %v", self.UID, err)
	}
	// Private directories: nothing the container wrote there reached the host.
	for _, p := range []string{"/tmp/d8v-private-" + string(pod.UID), "/run/libvirt/d8v-" + string(pod.UID)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s leaked to the host", p)
		}
	}
	if host, err := os.ReadDir("/etc/libvirt"); err == nil {
		var names []string
		for _, e := range host {
			names = append(names, e.Name())
		}
		if got := strings.Fields(read("etc-libvirt")); strings.Join(got, " ") != strings.Join(names, " ") {
			t.Errorf("/etc/libvirt in the container %q, on the host %q", got, names)
		}
	}
}

// Exit codes and termination messages, a program that does not exist, and a Failed pod.
func (s *nodeAgentSuite) testExitCodes(t *testing.T) {
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fail"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{
				busybox("ok", "echo fine"),
				busybox("bad", `echo "disk on fire" > /dev/termination-log; echo failing; exit 3`),
				func() corev1.Container {
					c := busybox("fallback", "echo last words from the log; exit 4")
					c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
					return c
				}(),
			},
		},
	})
	pod := s.waitPod(t, "fail", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	for name, want := range map[string]struct {
		code           int32
		reason, prefix string
	}{
		"ok": {0, "Completed", ""}, "bad": {3, "Error", "disk on fire"}, "fallback": {4, "Error", "last words from the log"},
	} {
		st := ctrStatus(pod, name)
		if st == nil || st.State.Terminated == nil {
			t.Errorf("%s: %+v", name, st)
			continue
		}
		term := st.State.Terminated
		if term.ExitCode != want.code || term.Reason != want.reason || !strings.HasPrefix(term.Message, want.prefix) ||
			term.StartedAt.IsZero() || term.FinishedAt.IsZero() {
			t.Errorf("%s terminated %+v, want exit %d %s %q", name, term, want.code, want.reason, want.prefix)
		}
		if st.RestartCount != 0 {
			t.Errorf("%s restarted under restartPolicy Never", name)
		}
	}
	if c := podCond(pod, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("ContainersReady %+v", c)
	}

	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "noexec"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
			{Name: "main", Image: "registry.example/d8v/no-such-program:dev"},
		}},
	})
	pod = s.waitPod(t, "noexec", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if st := ctrStatus(pod, "main"); st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 128 ||
		st.State.Terminated.Reason != "StartError" || !strings.Contains(st.State.Terminated.Message, "no-such-program") {
		t.Errorf("status of a missing program: %+v", st)
	}
}

// restartPolicy Always restarts with a restart count; a Deployment becomes available.
func (s *nodeAgentSuite) testRestarts(t *testing.T) {
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{busybox("main", "echo run; sleep 0.5; exit 1")}},
	})
	pod := s.waitPod(t, "crash", "restarted", func(p *corev1.Pod) bool {
		st := ctrStatus(p, "main")
		return st != nil && st.RestartCount >= 1 && st.LastTerminationState.Terminated != nil
	})
	st := ctrStatus(pod, "main")
	if st.LastTerminationState.Terminated.ExitCode != 1 || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, last state %+v", pod.Status.Phase, st.LastTerminationState)
	}
	pod = s.waitPod(t, "crash", "in back-off", func(p *corev1.Pod) bool {
		st := ctrStatus(p, "main")
		return st.State.Waiting != nil && st.State.Waiting.Reason == "CrashLoopBackOff"
	})
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("crash-looping pod is %s", pod.Status.Phase)
	}

	one := int32(1)
	labels := map[string]string{"app": "sleeper"}
	_, err := s.env.Kube.AppsV1().Deployments(s.ns).Create(s.ctx(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"d8v.test/agents": s.run},
					Containers:   []corev1.Container{busybox("main", "exec sleep 100000")},
				},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		d, err := s.env.Kube.AppsV1().Deployments(s.ns).Get(s.ctx(), "sleeper", metav1.GetOptions{})
		if err == nil && d.Status.AvailableReplicas == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment not available: %+v %v\n%s", d.Status, err, s.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	pods, err := s.env.Kube.CoreV1().Pods(s.ns).List(s.ctx(), metav1.ListOptions{LabelSelector: "app=sleeper"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("deployment pods: %v", err)
	}
	s.uids[pods.Items[0].UID] = true
}

// Deletion: SIGTERM to every container, SIGKILL after the grace period, terminal status, cleanup,
// and only then the Pod goes away.
func (s *nodeAgentSuite) testDeletion(t *testing.T) {
	out := filepath.Join(s.out, "stop")
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	grace := int64(4)
	// Each container is ready once its trap is set, so that the test deletes the pod only then.
	trapped := &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "test", "-f", "/tmp/trapped"}}}}
	polite := busybox("polite", `trap 'echo got TERM > /out/polite; exit 0' TERM; touch /tmp/trapped; while true; do sleep 0.2; done`)
	polite.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	polite.ReadinessProbe = trapped
	stubborn := busybox("stubborn", `trap '' TERM; touch /tmp/trapped; while true; do sleep 0.2; done`)
	stubborn.ReadinessProbe = trapped
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stopper"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{polite, stubborn},
			Volumes: []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: out, Type: &dirOrCreate}}}},
		},
	})
	pod := s.waitPod(t, "stopper", "Running", func(p *corev1.Pod) bool { return isReady(p) })
	procs := []nodeagent.RunningInfo{s.running(t, pod, "polite"), s.running(t, pod, "stubborn")}
	podDir := nodeagent.Layout{Root: s.agentOf(pod).root}.PodDir(pod.UID)

	ctx := s.ctx()
	w, err := s.env.Kube.CoreV1().Pods(s.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "stopper").String(), ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := s.env.Kube.CoreV1().Pods(s.ns).Delete(ctx, "stopper", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	last := pod
	timeout := time.After(60 * time.Second)
	gone := false
	for !gone {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				if ev.Type == watch.Deleted {
					gone = true
				} else {
					last = p
				}
			}
		case <-timeout:
			t.Fatalf("pod not deleted after 60s: %+v\n%s", last.Status, s.logs())
		}
	}
	took := time.Since(start)
	if took < time.Duration(grace)*time.Second || took > time.Duration(grace)*time.Second+15*time.Second {
		t.Errorf("deletion took %s with a %ds grace period and a container that ignores SIGTERM", took, grace)
	}
	for name, code := range map[string]int32{"polite": 0, "stubborn": 137} {
		st := ctrStatus(last, name)
		if st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != code {
			t.Errorf("last status of %s before deletion: %+v, want exit %d", name, st, code)
		}
	}
	if last.Status.Phase != corev1.PodFailed {
		t.Errorf("last phase %s, want Failed (a container was killed)", last.Status.Phase)
	}
	if b, err := os.ReadFile(filepath.Join(out, "polite")); err != nil || strings.TrimSpace(string(b)) != "got TERM" {
		t.Errorf("the polite container did not see SIGTERM: %q %v", b, err)
	}
	for _, ri := range procs {
		if procAlive(ri.Pid, ri.StartTicks) || procAlive(ri.ShimPid, ri.ShimStartTicks) {
			t.Errorf("process %d (shim %d) outlived its pod", ri.Pid, ri.ShimPid)
		}
	}
	if netnsExists(pod.UID) {
		t.Error("the pod's network namespace outlived it")
	}
	if _, err := os.Stat(podDir); !os.IsNotExist(err) {
		t.Errorf("pod directory %s outlived the pod: %v", podDir, err)
	}
}

// The Ready condition waits for the readiness gate, which another controller writes; the agent
// never drops that condition when it writes status.
func (s *nodeAgentSuite) testReadinessGate(t *testing.T) {
	gate := corev1.PodConditionType("d8v.test/gate")
	out := filepath.Join(s.out, "gate")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	c := busybox("main", "until [ -f /out/go ]; do sleep 0.2; done; touch /tmp/ready; exec sleep 100000")
	c.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	c.ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"/bin/busybox", "test", "-f", "/tmp/ready"}}}}
	s.create(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: corev1.PodSpec{
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
			Containers:     []corev1.Container{c},
			Volumes:        []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}}},
		},
	})
	pod := s.waitPod(t, "gated", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	s.running(t, pod, "main")
	setGate := func(status corev1.ConditionStatus) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: gate, Status: status, LastTransitionTime: metav1.Now(), Reason: "Test"}}}})
		if _, err := s.env.Kube.CoreV1().Pods(s.ns).Patch(s.ctx(), "gated", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	gateIs := func(p *corev1.Pod, want corev1.ConditionStatus) bool {
		c := podCond(p, gate)
		return c != nil && c.Status == want
	}
	readyIs := func(p *corev1.Pod, status corev1.ConditionStatus, reason string) bool {
		c := podCond(p, corev1.PodReady)
		return c != nil && c.Status == status && c.Reason == reason
	}
	// The container is not ready yet, so neither is the pod, gate or no gate.
	s.waitPod(t, "gated", "unready", func(p *corev1.Pod) bool { return readyIs(p, corev1.ConditionFalse, "ContainersNotReady") })
	setGate(corev1.ConditionTrue)
	// Now the container turns ready: the agent writes ContainersReady and Ready and must keep the gate.
	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pod = s.waitPod(t, "gated", "Ready", func(p *corev1.Pod) bool { return isReady(p) })
	if !gateIs(pod, corev1.ConditionTrue) {
		t.Fatalf("the agent dropped the readiness gate condition: %+v", pod.Status.Conditions)
	}
	setGate(corev1.ConditionFalse)
	pod = s.waitPod(t, "gated", "held back by its gate", func(p *corev1.Pod) bool {
		return readyIs(p, corev1.ConditionFalse, "ReadinessGatesNotReady")
	})
	if c := podCond(pod, corev1.ContainersReady); c == nil || c.Status != corev1.ConditionTrue || !gateIs(pod, corev1.ConditionFalse) {
		t.Errorf("conditions %+v", pod.Status.Conditions)
	}
	setGate(corev1.ConditionTrue)
	s.waitPod(t, "gated", "Ready again", func(p *corev1.Pod) bool { return isReady(p) && gateIs(p, corev1.ConditionTrue) })
	// Still there after a while of status writes.
	time.Sleep(2 * time.Second)
	s.waitPod(t, "gated", "still Ready with its gate", func(p *corev1.Pod) bool { return isReady(p) && gateIs(p, corev1.ConditionTrue) })
}

// Two agents are two nodes; the scheduler honours a nodeSelector for either.
func (s *nodeAgentSuite) testNodeSelector(t *testing.T) {
	ips := map[string]string{}
	for _, a := range s.agents {
		name := "on-" + a.name[len(a.name)-1:]
		s.create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"kubernetes.io/hostname": a.name},
				Containers:   []corev1.Container{busybox("main", "exec sleep 100000")},
			},
		})
		pod := s.waitPod(t, name, "Ready", isReady)
		if pod.Spec.NodeName != a.name {
			t.Errorf("pod %s landed on %s, want %s", name, pod.Spec.NodeName, a.name)
		}
		if _, err := os.Stat(nodeagent.Layout{Root: a.root}.PodDir(pod.UID)); err != nil {
			t.Errorf("pod %s is not in %s's root: %v", name, a.name, err)
		}
		s.running(t, pod, "main")
		ips[name] = pod.Status.PodIP
	}
	if ips["on-1"] == ips["on-2"] {
		t.Errorf("both pods got %s", ips["on-1"])
	}
}

// Stopping the agent leaves pods running; a new agent adopts them. Pods whose processes vanished
// while no agent ran are reported Failed, and pods deleted meanwhile are cleaned up.
func (s *nodeAgentSuite) testAgentRestart(t *testing.T) {
	a := s.agents[0]
	pin := map[string]string{"kubernetes.io/hostname": a.name}
	for _, name := range []string{"survivor", "victim", "orphan"} {
		s.create(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeSelector: pin, Containers: []corev1.Container{busybox("main", "exec sleep 100000")}},
		})
	}
	pods := map[string]*corev1.Pod{}
	procs := map[string]nodeagent.RunningInfo{}
	for _, name := range []string{"survivor", "victim", "orphan"} {
		pods[name] = s.waitPod(t, name, "Ready", isReady)
		procs[name] = s.running(t, pods[name], "main")
	}

	a.stop()
	for name, ri := range procs {
		if !procAlive(ri.Pid, ri.StartTicks) {
			t.Fatalf("stopping the agent killed %s's container", name)
		}
	}
	// While no agent runs: the victim's processes die without a trace, the orphan leaves the API.
	v := procs["victim"]
	_ = syscall.Kill(v.ShimPid, syscall.SIGKILL)
	_ = syscall.Kill(-v.Pid, syscall.SIGKILL)
	zero := int64(0)
	if err := s.env.Kube.CoreV1().Pods(s.ns).Delete(s.ctx(), "orphan", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	a.start()

	pod := s.waitPod(t, "victim", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if !strings.Contains(pod.Status.Message, "gone") {
		t.Errorf("lost pod's message %q", pod.Status.Message)
	}
	if st := ctrStatus(pod, "main"); st == nil || st.State.Terminated == nil || st.State.Terminated.Reason != "ContainerStatusUnknown" {
		t.Errorf("lost container status %+v", st)
	}
	survivor := s.waitPod(t, "survivor", "Ready after the restart", isReady)
	if st := ctrStatus(survivor, "main"); st.RestartCount != 0 || st.State.Running == nil ||
		!st.State.Running.StartedAt.Equal(&ctrStatus(pods["survivor"], "main").State.Running.StartedAt) {
		t.Errorf("survivor was restarted: %+v", st)
	}
	if ri := procs["survivor"]; !procAlive(ri.Pid, ri.StartTicks) {
		t.Error("survivor's process died across the agent restart")
	}
	orphan := pods["orphan"]
	l := nodeagent.Layout{Root: a.root}
	deadline := time.Now().Add(60 * time.Second)
	for procAlive(procs["orphan"].Pid, procs["orphan"].StartTicks) || netnsExists(orphan.UID) || exists(l.PodDir(orphan.UID)) {
		if time.Now().After(deadline) {
			t.Fatalf("the orphan (deleted while the agent was down) was not cleaned up\n%s", s.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Deleting every pod leaves no process, network namespace or pod directory behind.
func (s *nodeAgentSuite) testCleanup(t *testing.T) {
	ctx := s.ctx()
	fg := metav1.DeletePropagationForeground
	if err := s.env.Kube.AppsV1().Deployments(s.ns).Delete(ctx, "sleeper", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := s.env.Kube.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pods, err := s.env.Kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, p := range pods.Items {
				names = append(names, p.Name+"("+string(p.Status.Phase)+")")
			}
			t.Fatalf("pods left: %v %v\n%s", names, err, s.logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Let the agents finish the cleanup of pods whose API objects went first (terminal ones).
	start := time.Now()
	deadline = start.Add(30 * time.Second)
	for l := s.leftovers(); l != "" && time.Now().Before(deadline); l = s.leftovers() {
		if time.Since(start) > 5*time.Second {
			t.Logf("still left after %s:\n%s", time.Since(start).Round(time.Second), l)
		}
		time.Sleep(time.Second)
	}
	if l := s.leftovers(); l != "" {
		t.Errorf("left behind after every pod was deleted:\n%s\n%s", l, s.logs())
	}
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
