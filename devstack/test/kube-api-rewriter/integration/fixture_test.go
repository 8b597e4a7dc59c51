package integration

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kube-api-rewriter/pkg/crdrename"
	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/proxy"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
	"github.com/d8virt/kube-api-rewriter/pkg/transport"
)

// Names as the cluster stores them.
var (
	internalVMs  = schema.GroupVersionResource{Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationvirtualmachines"}
	internalVMIs = schema.GroupVersionResource{Group: "internal.virtualization.deckhouse.io", Version: "v1", Resource: "internalvirtualizationvirtualmachineinstances"}
	originalVMs  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
)

// mode is one way of running the rewriter: the sidecar proxy or the in-process RoundTripper.
type mode struct {
	name       string
	config     *rest.Config
	kubeconfig string // only the sidecar has one kubectl can use
	metrics    *metrics.Metrics
}

type fixture struct {
	env      *testenv.Env
	rewriter *rewrite.Rewriter
	modes    []mode
}

var (
	fixtureOnce sync.Once
	shared      *fixture
)

// setup installs the renamed KubeVirt CRDs once and starts a sidecar proxy for this test binary.
func setup(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() { shared = newFixture(t) })
	if shared == nil {
		t.Fatal("fixture setup failed earlier")
	}
	return shared
}

func newFixture(t *testing.T) *fixture {
	env := testenv.Get(t)
	rw := rewrite.New(rules.Default())

	stock, err := os.Open("testdata/kubevirt-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer stock.Close()
	var renamed bytes.Buffer
	if _, err := crdrename.Stream(rw, stock, &renamed, true); err != nil {
		t.Fatalf("rename CRDs: %v", err)
	}
	crds, err := testenv.DecodeCRDs(renamed.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	env.InstallCRDs(t, crds...)

	upstreamRT, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sidecarMetrics := metrics.New()
	engine := transport.New(upstreamRT, transport.Options{Rewriter: rw, Metrics: sidecarMetrics, Listener: "api", Log: log})
	// Deliberately never closed: the server lives as long as the test binary.
	srv := httptest.NewServer(proxy.NewAPI(upstream, engine, log))

	kubeconfig := filepath.Join(os.TempDir(), "rewriter-proxy-"+filepath.Base(srv.URL)+".kubeconfig")
	if err := controlplane.WriteRewriterKubeconfig(kubeconfig, srv.URL); err != nil {
		t.Fatal(err)
	}

	inprocMetrics := metrics.New()
	return &fixture{
		env:      env,
		rewriter: rw,
		modes: []mode{
			{name: "sidecar", config: restConfig(srv.URL), kubeconfig: kubeconfig, metrics: sidecarMetrics},
			{name: "inprocess", config: transport.Wrap(env.Config, transport.Options{Rewriter: rw, Metrics: inprocMetrics, Log: log}), metrics: inprocMetrics},
		},
	}
}

// restConfig points a client at a sidecar, which needs no credentials on loopback.
func restConfig(host string) *rest.Config { return &rest.Config{Host: host, QPS: 100, Burst: 200} }

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kubevirtv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// typed is a controller-runtime client that speaks kubevirt.io through the mode's rewriter.
func (m mode) typed(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(m.config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatalf("%s client: %v", m.name, err)
	}
	return c
}

func (m mode) dynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(m.config)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// forEachMode runs the test once through the sidecar and once in-process.
func forEachMode(t *testing.T, fn func(t *testing.T, fx *fixture, m mode)) {
	fx := setup(t)
	for _, m := range fx.modes {
		t.Run(m.name, func(t *testing.T) { fn(t, fx, m) })
	}
}
