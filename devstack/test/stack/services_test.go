package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/d8virt/devstack/nodeagent"
	"github.com/d8virt/devstack/testenv"
)

// TestServices runs pods on a node agent behind Services, as the stack's service-proxy serves
// them: a pod reaches a Service by every DNS name of it and by its cluster IP, through a named
// targetPort; the host reaches the cluster IP; an endpoint that goes away is no longer used; a
// headless Service's name stands for its pods; a pod with dnsPolicy None gets its own
// resolv.conf and still resolves through the nameserver it names.
func TestServices(t *testing.T) {
	env := testenv.Get(t)
	for _, p := range []string{"/bin/busybox", "/usr/bin/curl"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the pods of this test run busybox and curl: %v", err)
		}
	}
	// No --cluster-dns: the agent finds kube-system/kube-dns, as the module's tests' agents do.
	s, a := oneAgent(t, env, "svc")
	root := a.root
	s.ns = env.Namespace(t)
	ctx := testenv.Context(t)

	dnsSvc, err := env.Kube.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the stack's cluster DNS Service: %v", err)
	}
	dnsIP := dnsSvc.Spec.ClusterIP

	for _, n := range []string{"web-a", "web-b"} {
		s.create(t, webPod(n))
	}
	web := s.createService(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
	}})
	s.createService(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "webh"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 8080}},
	}})
	podA := s.waitPod(t, "web-a", "Ready", isReady)
	podB := s.waitPod(t, "web-b", "Ready", isReady)

	// The client asks every name in a loop and keeps the last answer of each in a file.
	names := map[string]string{
		"short":    "web",
		"ns":       "web." + s.ns,
		"svc":      "web." + s.ns + ".svc",
		"fqdn":     "web." + s.ns + ".svc.cluster.local",
		"ip":       web.Spec.ClusterIP,
		"api":      "kubernetes.default.svc:443",
		"headless": "webh:8080",
	}
	// curl resolves with glibc, which honours the search path and ndots (busybox is static and
	// cannot resolve at all).
	var script strings.Builder
	script.WriteString("cat /etc/resolv.conf > /out/resolv.tmp && mv /out/resolv.tmp /out/resolv.conf; while true; do\n")
	for k, host := range names {
		if k == "api" {
			fmt.Fprintf(&script, "  curl -sk -m 2 -o /dev/null -w '%%{http_code}' https://%s/ > /out/api.tmp 2>/out/api.err && mv /out/api.tmp /out/api\n", host)
			continue
		}
		fmt.Fprintf(&script, "  curl -sS -m 2 -o /out/%s.tmp http://%s/ 2>/out/%s.err && mv /out/%s.tmp /out/%s\n", k, host, k, k, k)
	}
	script.WriteString("  sleep 0.3\ndone\n")
	client := corev1.Container{Name: "client", Image: "curl", Command: []string{"/bin/sh", "-c", script.String()}}
	client.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	s.create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{client},
		Volumes:    []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}})
	clientPod := s.waitPod(t, "client", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	out := nodeagent.Layout{Root: root}.EmptyDirPath(clientPod.UID, "out")

	t.Run("ResolvConfClusterFirst", func(t *testing.T) {
		got := waitFile(t, filepath.Join(out, "resolv.conf"), func(string) bool { return true })
		want := fmt.Sprintf("nameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local", dnsIP, s.ns)
		if !strings.HasPrefix(got, want) || !strings.Contains(got, "options ndots:5") {
			t.Errorf("resolv.conf:\n%s\nwant it to start with\n%s\nand have options ndots:5", got, want)
		}
	})
	t.Run("PodToServiceByNameAndIP", func(t *testing.T) {
		for _, k := range []string{"short", "ns", "svc", "fqdn", "ip", "headless"} {
			got := waitFile(t, filepath.Join(out, k), func(b string) bool { return strings.HasPrefix(b, "served-by-web-") })
			t.Logf("%s (%s): %s", k, names[k], got)
		}
		// The apiserver's own Service answers (401 or 403 without credentials is an answer).
		waitFile(t, filepath.Join(out, "api"), func(b string) bool { return b == "401" || b == "403" })
	})
	t.Run("HostToClusterIP", func(t *testing.T) {
		seen := map[string]bool{}
		for i := 0; i < 20 && len(seen) < 2; i++ {
			seen[httpGet(t, "http://"+net.JoinHostPort(web.Spec.ClusterIP, "80")+"/")] = true
		}
		if !seen["served-by-web-a"] || !seen["served-by-web-b"] {
			t.Errorf("20 requests to the cluster IP reached %v, want both pods", seen)
		}
	})
	t.Run("Headless", func(t *testing.T) {
		want := []string{podA.Status.PodIP, podB.Status.PodIP}
		slices.Sort(want)
		deadline := time.Now().Add(30 * time.Second)
		for got := lookupA(t, dnsIP, "webh."+s.ns+".svc.cluster.local."); !slices.Equal(got, want); got = lookupA(t, dnsIP, "webh."+s.ns+".svc.cluster.local.") {
			if time.Now().After(deadline) {
				t.Fatalf("headless service resolves to %v, want the pods %v", got, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if got := lookupA(t, dnsIP, "web."+s.ns+".svc.cluster.local."); !slices.Equal(got, []string{web.Spec.ClusterIP}) {
			t.Errorf("service resolves to %v, want its cluster IP %s", got, web.Spec.ClusterIP)
		}
	})
	t.Run("EndpointGoesAway", func(t *testing.T) {
		// web-b leaves the Service but keeps serving: a proxy that kept using it would reach it.
		patch := []byte(`{"metadata":{"labels":{"app":"gone"}}}`)
		if _, err := env.Kube.CoreV1().Pods(s.ns).Patch(ctx, "web-b", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlice(t, env, s.ns, "web", []string{podA.Status.PodIP})
		time.Sleep(time.Second) // the proxy's informer follows the slice within milliseconds
		for i := 0; i < 20; i++ {
			if got := httpGet(t, "http://"+net.JoinHostPort(web.Spec.ClusterIP, "80")+"/"); got != "served-by-web-a" {
				t.Fatalf("request %d after web-b went: %q", i, got)
			}
		}
	})
	t.Run("DNSPolicyNone", func(t *testing.T) {
		c := corev1.Container{Name: "c", Image: "curl", Command: []string{"/bin/sh", "-c",
			"cat /etc/resolv.conf > /out/resolv.tmp && mv /out/resolv.tmp /out/resolv.conf; until curl -sS -m 2 -o /out/got.tmp http://web/ 2>/out/got.err; do sleep 0.3; done; mv /out/got.tmp /out/got; exec sleep 100000"}}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
		s.create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "none"}, Spec: corev1.PodSpec{
			DNSPolicy: corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{dnsIP}, Searches: []string{s.ns + ".svc.cluster.local"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}}},
			Containers: []corev1.Container{c},
			Volumes:    []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}})
		p := s.waitPod(t, "none", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		dir := nodeagent.Layout{Root: root}.EmptyDirPath(p.UID, "out")
		want := fmt.Sprintf("nameserver %s\nsearch %s.svc.cluster.local\noptions ndots:1\n", dnsIP, s.ns)
		if got := waitFile(t, filepath.Join(dir, "resolv.conf"), func(string) bool { return true }); got != want {
			t.Errorf("resolv.conf:\n%s\nwant\n%s", got, want)
		}
		waitFile(t, filepath.Join(dir, "got"), func(b string) bool { return b == "served-by-web-a" })
	})
}

// oneAgent builds node-agent and starts one agent with a node of its own (label
// d8v.test/agents=<run>, which s.create selects), stopped and cleaned up when the test ends.
func oneAgent(t *testing.T, env *testenv.Env, prefix string, extra ...string) (*nodeAgentSuite, *agentProc) {
	t.Helper()
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
	s := &nodeAgentSuite{t: t, env: env, run: hex.EncodeToString(b[:]), uids: map[types.UID]bool{}}
	name := prefix + "-" + s.run
	root := filepath.Join(t.TempDir(), "root")
	a := &agentProc{t: t, name: name, root: root, bin: filepath.Join(bin, "node-agent"), logPath: filepath.Join(t.TempDir(), "agent.log")}
	a.args = append([]string{"--kubeconfig", env.Kubeconfig, "--node-name", name, "--root-dir", root, "--bin-dir", bin,
		"--image-store", filepath.Join(t.TempDir(), "images"), "--labels", "d8v.test/agents=" + s.run, "--kubelet-port", "-1"}, extra...)
	s.agents = []*agentProc{a}
	t.Cleanup(func() { s.teardown() })
	a.start()
	return s, a
}

func webPod(name string) *corev1.Pod {
	init := busybox("index", "echo served-by-$(POD_NAME) > /www/index.html")
	init.Env = []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name")}
	init.VolumeMounts = []corev1.VolumeMount{{Name: "www", MountPath: "/www"}}
	httpd := corev1.Container{Name: "httpd", Image: "busybox", Command: []string{"/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"},
		VolumeMounts: []corev1.VolumeMount{{Name: "www", MountPath: "/www", ReadOnly: true}},
		Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/index.html", Port: intstr.FromString("http")}}},
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{init}, Containers: []corev1.Container{httpd},
		Volumes: []corev1.Volume{{Name: "www", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}}
}

func (s *nodeAgentSuite) createService(t *testing.T, svc *corev1.Service) *corev1.Service {
	t.Helper()
	got, err := s.env.Kube.CoreV1().Services(s.ns).Create(s.ctx(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", svc.Name, err)
	}
	return got
}

// waitFile polls a file until ok accepts its trimmed content, for 60 s.
func waitFile(t *testing.T, path string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(path)
		got := strings.TrimSpace(string(b))
		if err == nil && ok(got) {
			return string(b)
		}
		if time.Now().After(deadline) {
			errs, _ := os.ReadFile(strings.TrimSuffix(path, filepath.Ext(path)) + ".err")
			t.Fatalf("%s: %q %v (stderr: %s)", path, got, err, errs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s from the host: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

func lookupA(t *testing.T, server, name string) []string {
	t.Helper()
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), net.JoinHostPort(server, "53"))
	if err != nil {
		t.Fatalf("ask %s for %s: %v", server, name, err)
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

// waitSlice waits until the Service's EndpointSlices hold exactly the ready addresses want.
func waitSlice(t *testing.T, env *testenv.Env, ns, svc string, want []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := env.Kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		var got []string
		if err == nil {
			for _, es := range list.Items {
				for _, ep := range es.Endpoints {
					if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
						got = append(got, ep.Addresses...)
					}
				}
			}
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoints of %s: %v, want %v (%v)", svc, got, want, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
