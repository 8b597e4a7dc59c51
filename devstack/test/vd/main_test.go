// Package vd tests VirtualDisks on real parts: a control plane with kubevirt-core and a local
// node, the local provisioner's volumes, the virtualization-controller binary, importer Pods on
// the node reading from an HTTP server in a test host, and the tiny guest booting from a disk's
// claim under QEMU. Tests that boot a VM must hold the machine-wide lock:
//
//	flock /tmp/vm-boot.lock go test -count=1 -v ./devstack/test/vd/
package vd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/coretest"
	"github.com/d8virt/devstack/guest"
	"github.com/d8virt/devstack/provisioner"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/corescheme"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	testenv.Main(m)
}

// stack is a cluster with the core, one node, the provisioner and virtualization-controller,
// and an HTTP server that serves the tiny guest's disk.
type stack struct {
	s *controlplane.Stack
	// admin talks to the friendly kinds and core objects; kubevirt talks kubevirt.io through a
	// rewriter, as users of the core do.
	admin    client.Client
	kubevirt client.Client
	// kubevirtREST is the rewriter's config, for the console.
	kubevirtREST *rest.Config
	// guestURL serves the tiny guest's qcow2 disk; guestSHA256 is its checksum.
	guestURL    string
	guestSHA256 string
	// metricsURL is the controller's /metrics.
	metricsURL string
}

const node = "vd-node"

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
	// Test hosts are machine-wide: binaries running side by side need their own names.
	cc := coretest.Start(t, coretest.Config{Repo: repo, HostName: fmt.Sprintf("vd-virt-api-%d", os.Getpid()), Nodes: []string{node}, ImageStore: t.TempDir()})
	bin := cc.Core.BinDir
	build := exec.Command("go", "build", "-o", bin+"/", "./virtualization-controller/cmd/virtualization-controller", "./virtualization-controller/cmd/importer", "./devstack/cmd/"+provisioner.Daemon)
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// Runs before coretest's cleanup: with the pods gone (each test deletes what it made), the
	// daemons stop and the volumes are unmounted before the state directory goes.
	t.Cleanup(func() {
		if err := cc.Stack.Down(false); err != nil {
			t.Errorf("down: %v", err)
		}
		if err := provisioner.ReleaseVolumes(context.Background(), cc.Stack); err != nil {
			t.Errorf("release volumes: %v", err)
		}
	})
	cc.Stack.AddComponents(provisioner.StackComponent(cc.Stack, filepath.Join(bin, provisioner.Daemon)))
	if err := cc.Stack.Up(ctx); err != nil {
		t.Fatalf("provisioner: %v", err)
	}

	st := &stack{s: cc.Stack}
	st.admin = adminClient(t, cc.Stack.KubeconfigPath())
	st.kubevirtREST, err = clientcmd.BuildConfigFromFlags("", cc.Kubevirt)
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
	st.guestURL, st.guestSHA256 = serveFile(t, env, img.Disk)
	st.metricsURL = startController(t, bin, cc.Stack.KubeconfigPath())
	return st
}

func adminClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
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

// startController runs the virtualization-controller binary against the stack, as its
// Deployment would (without DVCR, which these tests do not use), and returns its metrics URL.
// Its log is printed when the test fails.
func startController(t *testing.T, bin, kubeconfig string) string {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "virtualization-controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "virtualization-controller"),
		"--namespace=d8-virtualization", "--importer-image=d8v.local/importer:e2e",
		"--dvcr-address=dvcr.d8-virtualization.svc:5000", "--dvcr-pull-address=dvcr.d8-virtualization.svc",
		"--dvcr-auth-file=/dev/null", "--dvcr-ca-file=/dev/null", "--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(port), "--health-probe-bind-address=0",
		"--progress-interval=1s", "--log-level=debug")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("==> virtualization-controller log <==\n%s", b)
		}
	})
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
func scrape(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
