package integration

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/d8virt/devstack/nodeagent"
)

// What pods get on a node: the Node objects, pod networking, env, volumes and tokens, and placement.

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

// testRequestedAddress: a pod annotated with cni.cilium.io/ipAddress gets that address, as a CNI
// gives it; a second pod asking for the same address gets none, with a FailedCreatePodSandBox
// event naming the holder, and its sandbox retried; a pod labelled to share it (a migration's
// target) runs beside the holder and takes the address over once the holder is gone.
func (s *nodeAgentSuite) testRequestedAddress(t *testing.T) {
	req := s.env.Net.Requested
	if !req.IsValid() {
		t.Skip("the local network has no requested range")
	}
	// A random address of the requested range: other stacks on this machine share the network.
	var b [1]byte
	_, _ = rand.Read(b[:])
	want := req.Addr()
	for range 1 + int(b[0])%((1<<(32-req.Bits()))-2) {
		want = want.Next()
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{nodeagent.RequestedIPAnnotation: want.String()}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{busybox("main", "exec sleep 100000")}},
		}
	}
	s.create(t, pod("fixed"))
	got := s.waitPod(t, "fixed", "Running at its address", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
	if got.Status.PodIP != want.String() {
		t.Fatalf("pod IP %s, want the requested %s", got.Status.PodIP, want)
	}
	s.create(t, pod("clash"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := s.env.Kube.CoreV1().Events(s.ns).List(s.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=clash,reason=FailedCreatePodSandBox"})
		if err == nil && len(evs.Items) > 0 {
			if msg := evs.Items[0].Message; !strings.Contains(msg, "requested address "+want.String()+": the address is taken by host pod-"+string(got.UID)) {
				t.Fatalf("event message %q", msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no FailedCreatePodSandBox event for the clashing pod: %v\n%s", err, s.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	clash, err := s.env.Kube.CoreV1().Pods(s.ns).Get(s.ctx(), "clash", metav1.GetOptions{})
	if err != nil || clash.Status.PodIP != "" {
		t.Fatalf("the clashing pod: %v, IP %q", err, clash.Status.PodIP)
	}
	deletePod := func(name string) {
		t.Helper()
		if err := s.env.Kube.CoreV1().Pods(s.ns).Delete(s.ctx(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	deletePod("clash")

	// A pod labelled as a migration's target shares the address: it runs at an address of its own
	// and takes the requested one over once the holder is gone.
	sharer := pod("sharer")
	sharer.Labels = map[string]string{nodeagent.SharePriorityLabel: "2"}
	s.create(t, sharer)
	shared := s.waitPod(t, "sharer", "Running beside the holder", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
	if shared.Status.PodIP == want.String() {
		t.Fatalf("the sharer got %s while the holder lives", want)
	}
	deletePod("fixed")
	deadline = time.Now().Add(60 * time.Second)
	for {
		evs, err := s.env.Kube.CoreV1().Events(s.ns).List(s.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=sharer,reason=SharedAddressClaimed"})
		if err == nil && len(evs.Items) > 0 {
			if msg := evs.Items[0].Message; !strings.Contains(msg, "the Pod holds "+want.String()) {
				t.Fatalf("event message %q", msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sharer did not take %s over once the holder was gone: %v\n%s", want, err, s.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	deletePod("sharer")
}
