// Package testenv gives integration tests a real control plane: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler from hack/build-k8s.sh.
//
// A test binary calls Main from TestMain. If D8V_TEST_KUBECONFIG names a stack that answers
// /readyz (make test starts one), every test binary shares it; otherwise the binary starts a private
// stack on free ports in a temporary directory and purges it when its tests end. Missing binaries
// are built, never skipped.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/localnet"
)

// KubeconfigEnv names the kubeconfig of a running stack that test binaries should share.
const KubeconfigEnv = "D8V_TEST_KUBECONFIG"

// Env is the control plane of one test binary.
type Env struct {
	Kubeconfig string
	Config     *rest.Config
	Net        localnet.Net
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Ext        apiextensionsclient.Interface
}

var current *Env

// Main runs the package's tests against a real control plane and exits with their status. The
// after functions run when the tests are done, before the control plane stops: they tear down
// what the package's tests shared.
func Main(m *testing.M, after ...func() error) {
	os.Exit(run(m, after))
}

func run(m *testing.M, after []func() error) int {
	env, stop, err := start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv: no control plane:", err)
		return 1
	}
	current = env
	code := m.Run()
	for _, f := range after {
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: teardown:", err)
			code = max(code, 1)
		}
	}
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Get returns the control plane; the package's TestMain must have called Main.
func Get(t testing.TB) *Env {
	t.Helper()
	if current == nil {
		t.Fatal("testenv: TestMain must call testenv.Main")
	}
	return current
}

func start(ctx context.Context) (*Env, func() error, error) {
	n, err := localnet.Default()
	if err != nil {
		return nil, nil, err
	}
	if kc := os.Getenv(KubeconfigEnv); kc != "" {
		env, err := newEnv(kc, n)
		if err != nil {
			return nil, nil, err
		}
		if err := ping(ctx, env.Kube); err != nil {
			return nil, nil, fmt.Errorf("%s=%s: stack does not answer: %w", KubeconfigEnv, kc, err)
		}
		return env, func() error { return nil }, nil
	}

	if err := controlplane.EnsureBinaries(os.Stderr); err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "d8v-stack-")
	if err != nil {
		return nil, nil, fmt.Errorf("state dir: %w", err)
	}
	// FreePortBase tries the ports on the bridge's address too, which exists only with the bridge.
	if err := n.Ensure(); err != nil {
		return nil, nil, err
	}
	base, err := FreePortBase(n)
	if err != nil {
		return nil, nil, err
	}
	s, err := controlplane.New(controlplane.Config{StateDir: dir, BinDir: controlplane.BinDir(), PortBase: base, Net: n, Log: os.Stderr})
	if err != nil {
		return nil, nil, err
	}
	// Like `devcluster up`, the stack serves its Services and cluster DNS, and provisions volumes
	// of its default StorageClass.
	if err := buildDaemons(dir); err != nil {
		return nil, nil, err
	}
	AddClusterDaemons(s, filepath.Join(dir, "bin"))
	stop := func() error {
		err := ReleaseClusterDaemons(context.Background(), s)
		return errors.Join(err, s.Down(true))
	}
	if err := s.Up(ctx); err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	env, err := newEnv(s.KubeconfigPath(), n)
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	return env, stop, nil
}

// buildDaemons builds the cluster daemons from this checkout into dir/bin.
func buildDaemons(dir string) error {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return errors.New("cannot locate the checkout to build the stack daemons")
	}
	cmd := exec.Command("go", append([]string{"build", "-o", filepath.Join(dir, "bin") + "/"}, ClusterDaemonPackages...)...)
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the stack daemons: %w\n%s", err, out)
	}
	return nil
}

func newEnv(kubeconfig string, n localnet.Net) (*Env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	env := &Env{Kubeconfig: kubeconfig, Config: cfg, Net: n}
	if env.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if env.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if env.Ext, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return env, nil
}

func ping(ctx context.Context, kube kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("readyz: %q", body)
	}
	return nil
}

// FreePortBase finds six consecutive free ports: a private stack uses five, the core six.
func FreePortBase(n localnet.Net) (int, error) {
	for try := 0; try < 50; try++ {
		var b [2]byte
		_, _ = rand.Read(b[:])
		base := 20000 + int(b[0])<<5 + int(b[1])%32*6
		if allFree(base, n) {
			return base, nil
		}
	}
	return 0, errors.New("no free port range for a private stack")
}

func allFree(base int, n localnet.Net) bool {
	for p := base; p < base+6; p++ {
		for _, host := range []string{"127.0.0.1", n.GatewayIP().String()} {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				return false
			}
			ln.Close()
		}
	}
	return true
}

// Context is a context bound to the test's life with a generous deadline.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Namespace creates a fresh namespace for the test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	ns, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "t-" + dnsLabel(t.Name(), 40) + "-",
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		err := e.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// Host creates a test host (a network namespace on the local bridge) and removes it when the test
// ends. The name gets a random suffix, since test binaries that share a stack run in parallel.
func (e *Env) Host(t testing.TB, name string) localnet.Host {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	h, err := e.Net.AddHost(dnsLabel(name, 20) + "-" + hex.EncodeToString(b[:]))
	if err != nil {
		t.Fatalf("create test host: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Net.DeleteHost(h.Name); err != nil {
			t.Errorf("delete test host %s: %v", h.Name, err)
		}
	})
	return h
}

// InstallCRDs creates or updates the CRDs and waits until they are established. CRDs are cluster
// wide and shared by parallel test binaries, so they stay installed.
func (e *Env) InstallCRDs(t testing.TB, crds ...*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	ctx := Context(t)
	for _, crd := range crds {
		if err := e.applyCRD(ctx, crd); err != nil {
			t.Fatalf("install CRD %s: %v", crd.Name, err)
		}
	}
}

// InstallCRDFiles installs every CRD in the given YAML files, which may hold several documents.
func (e *Env) InstallCRDFiles(t testing.TB, paths ...string) {
	t.Helper()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		crds, err := DecodeCRDs(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		e.InstallCRDs(t, crds...)
	}
}

// DecodeCRDs decodes every CustomResourceDefinition in a multi-document YAML or JSON stream.
func DecodeCRDs(data []byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := dec.Decode(crd)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode CRD: %w", err)
		}
		if crd.Kind == "" {
			continue
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s %s is not a CustomResourceDefinition", crd.Kind, crd.Name)
		}
		out = append(out, crd)
	}
}

func (e *Env) applyCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	api := e.Ext.ApiextensionsV1().CustomResourceDefinitions()
	existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, crd, metav1.CreateOptions{})
	case err == nil:
		crd = crd.DeepCopy()
		crd.ResourceVersion = existing.ResourceVersion
		_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// dnsLabel turns a test name into a lowercase DNS label of at most max bytes.
func dnsLabel(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > max {
		out = strings.Trim(out[:max], "-")
	}
	if out == "" {
		out = "x"
	}
	return out
}

// ExposeService puts a server that runs outside any pod (in a test host) behind a Service: a
// selectorless Service on port 443 and a hand-made EndpointSlice pointing at ip:port. The apiserver
// routes aggregated APIs and webhooks to such endpoints directly.
func (e *Env) ExposeService(t testing.TB, ns, name, ip string, port int32) {
	t.Helper()
	ctx := Context(t)
	_, err := e.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "https", Port: 443, TargetPort: intstr.FromInt32(port), Protocol: corev1.ProtocolTCP,
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", ns, name, err)
	}
	portName, proto, ready := "https", corev1.ProtocolTCP, true
	_, err = e.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "testenv",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create endpoint slice %s/%s: %v", ns, name, err)
	}
}

// FreeLoopbackAddr is a 127.0.0.1 address with a port nothing listens at right now.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
