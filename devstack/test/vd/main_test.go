// Package vd tests VirtualDisks on real parts: a cluster with the module installed from the
// chart (moduletest.Installed: the suite's shared one, or else one of the package's own on one
// local node; kubevirt-core, DVCR, virtualization-controller, Services and cluster DNS, the
// local provisioner's volumes), importer Pods on the node reading from
// an HTTP server in a test host or from DVCR, and the tiny guest booting from a disk's claim
// under QEMU. Tests that boot a VM must hold the machine-wide lock:
//
//	flock /tmp/vm-boot.lock go test -count=1 -v ./devstack/test/vd/
package vd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/module"
	"github.com/d8virt/devstack/moduletest"
	"github.com/d8virt/devstack/prometheus"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/corescheme"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}

// stack is a cluster with the module installed (the suite's shared one, or the package's own
// on one node), and an HTTP server that serves the tiny guest's disk.
type stack struct {
	// admin talks to the friendly kinds and core objects; kubevirt talks kubevirt.io through a
	// rewriter, as users of the core do.
	admin    client.Client
	kubevirt client.Client
	// kubevirtREST is the rewriter's config, for the console.
	kubevirtREST *rest.Config
	// guestURL serves the tiny guest's qcow2 disk (the file guestDisk); guestSHA256 is its checksum.
	guestDisk   string
	guestURL    string
	guestSHA256 string
	// metrics scrapes the chart's virtualization-controller.
	metrics *metricsScraper
}

func startStack(t *testing.T) *stack {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, mounts, loop devices, libvirtd and QEMU")
	}
	ctx := longContext(t)
	env := testenv.Get(t)
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	img, err := guest.BuildImage(ctx)
	if err != nil {
		t.Fatalf("guest image: %v", err)
	}
	// The suite's shared cluster, or one of the package's own on one node.
	mc, err := moduletest.Installed(ctx, moduletest.Config{Repo: repo, Net: env.Net, Nodes: []string{"vd-node"}, Log: os.Stderr})
	if err != nil {
		t.Fatalf("the cluster with the module: %v", err)
	}
	// Runs after the tests' own cleanups (each test deletes what it made): a cluster of the
	// package's own stops, the pods go, the volumes are released and every file is removed.
	t.Cleanup(func() {
		if t.Failed() {
			var b strings.Builder
			mc.Logs(&b)
			t.Log(b.String())
		}
		if err := mc.Stop(); err != nil {
			t.Errorf("stop the stack: %v", err)
		}
	})

	st := &stack{}
	adminREST, err := clientcmd.BuildConfigFromFlags("", mc.Stack.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	st.admin = adminClient(t, adminREST)
	st.kubevirtREST, err = clientcmd.BuildConfigFromFlags("", mc.Kubevirt)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := corescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	if st.kubevirt, err = client.New(st.kubevirtREST, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(adminREST)
	if err != nil {
		t.Fatal(err)
	}
	st.guestDisk = img.Disk
	st.guestURL, st.guestSHA256 = serveFile(t, env, img.Disk)
	st.metrics = newMetricsScraper(t, kube)
	return st
}

func adminClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serveFile serves path as /<its name> from an HTTP server in a test host (anything else is a
// 404), and returns its URL and sha256.
func serveFile(t *testing.T, env *testenv.Env, path string) (string, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	host := env.Host(t, fmt.Sprintf("vd-http-%d", os.Getpid()))
	ln, err := host.Listen("tcp", net.JoinHostPort(host.IP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	name := "/" + filepath.Base(path)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != name {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + name, hex.EncodeToString(sum[:])
}

// metricsScraper reads the chart's virtualization-controller metrics as Prometheus does: through
// its metrics Service and kube-rbac-proxy, with the token of an account bound to the chart's
// metrics-reader ClusterRole, verifying the chart's certificate.
type metricsScraper struct {
	client *http.Client
	url    string
	token  string
}

const metricsService = "virtualization-controller-metrics"

func newMetricsScraper(t *testing.T, kube kubernetes.Interface) *metricsScraper {
	t.Helper()
	ctx := longContext(t)
	// The cluster may be the suite's: the account and its binding are the run's own and go at
	// the end.
	account := fmt.Sprintf("vd-metrics-%d", os.Getpid())
	if _, err := kube.CoreV1().ServiceAccounts(module.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.CoreV1().ServiceAccounts(module.Namespace).Delete(context.Background(), account, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the metrics account: %v", err)
		}
	})
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: account},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: module.Release + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: module.Namespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), account, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the metrics binding: %v", err)
		}
	})
	token, err := prometheus.Token(ctx, kube, module.Namespace, account, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := kube.CoreV1().Secrets(module.Namespace).Get(ctx, metricsService+"-tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatalf("secret %s holds no ca.crt", secret.Name)
	}
	svc, err := kube.CoreV1().Services(module.Namespace).Get(ctx, metricsService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "https-metrics" {
			port = p.Port
		}
	}
	if port == 0 {
		t.Fatalf("service %s has no port https-metrics: %+v", svc.Name, svc.Spec.Ports)
	}
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: metricsService + "." + module.Namespace + ".svc"}
	return &metricsScraper{
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}},
		url:    "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port))) + "/metrics",
		token:  token,
	}
}

// namespace creates a fresh namespace and deletes it at the end, waiting until it is gone (its
// disks, claims and volumes with it).
func (st *stack) namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := st.admin.Create(longContext(t), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := st.admin.Delete(ctx, ns); err != nil {
			t.Errorf("delete namespace: %v", err)
			return
		}
		err := poll(ctx, 3*time.Minute, func(ctx context.Context) error {
			if err := st.admin.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%v)", name, err)
			}
			var pvs corev1.PersistentVolumeList
			if err := st.admin.List(ctx, &pvs); err != nil {
				return err
			}
			for _, pv := range pvs.Items {
				if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == name {
					return fmt.Errorf("volume %s of the namespace still there", pv.Name)
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	return name
}

// longContext lasts for the whole test: building and starting the stack alone can take more
// than testenv.Context's five minutes on a loaded machine, and so can a test that boots a VM
// twice.
func longContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// poll calls check until it is nil or timeout passes, and returns its last error then.
func poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	if err := poll(longContext(t), timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// scrape reads the controller's metrics text.
func (m *metricsScraper) scrape(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", m.url, resp.Status, b)
	}
	return string(b), nil
}
