package ipam

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1alpha2 "github.com/d8virt/api/core/v1alpha2"
	"github.com/d8virt/api/core/v1alpha3"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/virtualization-controller/pkg/controller/vmip"
	"github.com/d8virt/virtualization-controller/pkg/ipam"
	"github.com/d8virt/virtualization-controller/pkg/webhook/classconversion"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmdefaulting"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmipvalidation"
	"github.com/d8virt/virtualization-controller/pkg/webhook/vmvalidation"
)

// testCIDR is the range of this package's addresses: no other test hands out leases in it.
const testCIDR = "10.251.0.0/24"

func setupCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	crds, err := filepath.Glob(filepath.Join(repoRoot(t), "crds", "virtualization.deckhouse.io", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no friendly CRDs (%v): run make generate", err)
	}
	env.InstallCRDFiles(t, crds...)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func testRange(t *testing.T) ipam.Range {
	t.Helper()
	rng, err := ipam.ParseRange([]string{testCIDR})
	if err != nil {
		t.Fatal(err)
	}
	return rng
}

// controller is the IPAM reconcilers and the webhook server in a manager of their own.
type controller struct {
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
	// url is the webhook server's base URL on the bridge, ca its CA for a caBundle.
	url string
	ca  []byte
}

// startController runs a manager with the IPAM reconcilers (retention 0: a released lease goes
// at once) and the webhook server on the bridge address until stop or the test's end.
func startController(t *testing.T, env *testenv.Env) *controller {
	t.Helper()
	scheme := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{v1alpha2.AddToScheme, v1alpha3.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	host := env.Net.GatewayIP().String()
	port := freePort(t, host)
	certDir := t.TempDir()
	ca := writeServingCert(t, certDir, host)
	mgr, err := ctrl.NewManager(env.Config, manager.Options{
		Scheme:                 scheme,
		Logger:                 testr.NewWithOptions(t, testr.Options{Verbosity: 0}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test (and a restart within one) runs a manager of its own in this process.
		Controller:    config.Controller{SkipNameValidation: ptr.To(true)},
		WebhookServer: webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := testRange(t)
	recorder := mgr.GetEventRecorder(vmip.EventSource)
	if err := vmip.Setup(context.Background(), mgr, vmip.Config{Range: rng, Retention: 0, Clock: clock.RealClock{}, Recorder: recorder}); err != nil {
		t.Fatal(err)
	}
	srv := mgr.GetWebhookServer()
	srv.Register(classconversion.Path, classconversion.NewHandler(mgr.GetLogger()))
	srv.Register(vmipvalidation.Path, &webhook.Admission{Handler: vmipvalidation.NewValidator(mgr.GetAPIReader(), rng, admission.NewDecoder(scheme))})
	srv.Register(vmvalidation.Path, &webhook.Admission{Handler: vmvalidation.NewValidator(mgr.GetAPIReader(), admission.NewDecoder(scheme))})
	srv.Register(vmdefaulting.Path, &webhook.Admission{Handler: vmdefaulting.NewDefaulter(mgr.GetAPIReader(), admission.NewDecoder(scheme))})
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller{mgr: mgr, cancel: cancel, done: make(chan error, 1), url: fmt.Sprintf("https://%s:%d", host, port), ca: ca}
	go func() { c.done <- mgr.Start(ctx) }()
	t.Cleanup(c.stop)
	waitServing(t, host, port)
	return c
}

func (c *controller) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
	c.cancel = nil
}

func freePort(t *testing.T, host string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitServing(t *testing.T, host string, port int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, fmt.Sprint(port)), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook server not serving: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeServingCert writes tls.crt and tls.key for the address into dir and returns the CA.
func writeServingCert(t *testing.T, dir, host string) []byte {
	t.Helper()
	cert, ca := testenv.ServingCert(t, []string{"ipam-webhook"}, []net.IP{net.ParseIP(host)})
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// registerValidation registers the VirtualMachineIPAddress and VirtualMachine webhooks for
// namespace ns only.
func registerValidation(t *testing.T, env *testenv.Env, c *controller, ns string) {
	t.Helper()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	hook := func(name, path, resource string) admissionregistrationv1.ValidatingWebhook {
		url := c.url + path
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: c.ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"virtualization.deckhouse.io"}, APIVersions: []string{"v1alpha2"}, Resources: []string{resource}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "ipam-test-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("vmip.virtualization.deckhouse.io", vmipvalidation.Path, "virtualmachineipaddresses"),
			hook("vm.virtualization.deckhouse.io", vmvalidation.Path, "virtualmachines"),
		},
	}
	api := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := api.Create(testenv.Context(t), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := api.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete webhook configuration: %v", err)
		}
	})
}

// cleanupLeases deletes, when the test ends, the VirtualMachineIPAddresses of testCIDR (and
// waits until they are gone: the namespace's own deletion is asynchronous, and the next test's
// controller would make leases again for the addresses they still hold), then the leases.
func cleanupLeases(t *testing.T, c client.Client) {
	t.Helper()
	rng := testRange(t)
	t.Cleanup(func() {
		ctx := context.Background()
		inRange := func(v *v1alpha2.VirtualMachineIPAddress) bool {
			for _, a := range []string{v.Status.Address, v.Spec.StaticIP} {
				if _, err := rng.Check(a); a != "" && err == nil {
					return true
				}
			}
			return false
		}
		poll(t, time.Minute, "the test's VirtualMachineIPAddresses gone", func() (bool, string) {
			var list v1alpha2.VirtualMachineIPAddressList
			if err := c.List(ctx, &list); err != nil {
				return false, err.Error()
			}
			left := 0
			for i := range list.Items {
				v := &list.Items[i]
				if !inRange(v) {
					continue
				}
				left++
				// No controller runs any more to drop the in-use protection.
				if len(v.Finalizers) > 0 {
					patch := client.MergeFrom(v.DeepCopy())
					v.Finalizers = nil
					_ = c.Patch(ctx, v, patch)
				}
				_ = c.Delete(ctx, v)
			}
			return left == 0, fmt.Sprintf("%d left", left)
		})
		var leases v1alpha2.VirtualMachineIPAddressLeaseList
		if err := c.List(ctx, &leases); err != nil {
			t.Errorf("list leases: %v", err)
			return
		}
		for i := range leases.Items {
			addr, err := ipam.ParseLeaseName(leases.Items[i].Name)
			if err != nil || !rng.Contains(addr) {
				continue
			}
			if err := c.Delete(ctx, &leases.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete lease %s: %v", leases.Items[i].Name, err)
			}
		}
	})
}

func newClient(t *testing.T, env *testenv.Env) client.Client {
	t.Helper()
	scheme := kruntime.NewScheme()
	if err := v1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
