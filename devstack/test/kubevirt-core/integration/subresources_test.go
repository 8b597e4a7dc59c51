package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/buildinfo"
	"github.com/d8virt/kubevirt-core/pkg/virtapi/subresources"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// startVirtAPI serves subresources.kubevirt.io from a test host behind real APIServices (v1 and
// v1alpha3) for the duration of the test, with the server talking kubevirt.io through the
// fixture's rewriter sidecar. It returns the address virt-api listens on, for calls that bypass
// the apiserver.
func startVirtAPI(t *testing.T, fx *fixture) string {
	t.Helper()
	env := fx.env
	ctx := context.Background()
	ns := env.Namespace(t)
	host := env.Host(t, "virt-api")
	auth, err := subresources.LoadRequestHeader(ctx, env.Kube)
	if err != nil {
		t.Fatal(err)
	}
	srv := &subresources.Server{Client: fx.client, Auth: auth, Authorizer: subresources.Authorizer{Kube: env.Kube},
		Info: subresources.Info{Build: buildinfo.Get(), Kube: env.Kube.Discovery()}}
	cert, caPEM := testenv.ServingCert(t, []string{"virt-api." + ns + ".svc"}, nil)
	ln, err := host.Listen("tcp", net.JoinHostPort(host.IP.String(), "8443"))
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: auth.ClientCAs, ClientAuth: tls.VerifyClientCertIfGiven,
	}}

	go func() { _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })
	env.ExposeService(t, ns, "virt-api", host.IP.String(), 8443)

	for _, v := range virtapicontract.SubresourcesVersions {
		env.RegisterAPIService(t, virtapicontract.SubresourcesGroup, v, ns, "virt-api", caPEM)
	}
	return ln.Addr().String()
}

var errNotYet = apierrors.NewServiceUnavailable("not yet")

// command sends PUT /apis/subresources.kubevirt.io/v1/.../NAME/CMD through the rewriter sidecar,
// as virtctl would, and returns the status code and Status message.
func command(t *testing.T, cfg *rest.Config, ns, resource, name, cmd, body string) (int, string) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := kube.CoreV1().RESTClient().Put().AbsPath("/apis/subresources.kubevirt.io/v1", "namespaces", ns, resource, name, cmd)
	if body != "" {
		req = req.Body([]byte(body)).SetHeader("Content-Type", "application/json")
	}
	res := req.Do(context.Background())
	var code int
	res.StatusCode(&code)
	if err := res.Error(); err != nil {
		if se, ok := err.(apierrors.APIStatus); ok {
			return int(se.Status().Code), se.Status().Message
		}
		t.Fatalf("%s %s: %v", cmd, name, err)
	}
	return code, ""
}

func TestLifecycleCommands(t *testing.T) {
	fx := setup(t)
	startVirtAPI(t, fx)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)

	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "missing", "start", ""); code != http.StatusNotFound {
		t.Errorf("start of a missing VM: %d %s", code, msg)
	}
	if err := fx.client.Create(ctx, newVM(ns, "life", kubevirtv1.RunStrategyHalted)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "stopped", vmStatus(fx, ns, "life", kubevirtv1.VirtualMachineStatusStopped))

	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "stop", ""); code != http.StatusConflict || !strings.Contains(msg, "VM is not running") {
		t.Errorf("stop of a stopped VM: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "restart", ""); code != http.StatusConflict || !strings.Contains(msg, "RunStategy Halted does not support manual restart requests") {
		t.Errorf("restart of a halted VM: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "start", "{not json"); code != http.StatusBadRequest || !strings.Contains(msg, "Can not unmarshal Request body") {
		t.Errorf("start with a bad body: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "start", ""); code != http.StatusAccepted {
		t.Fatalf("start: %d %q", code, msg)
	}
	var vm kubevirtv1.VirtualMachine
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "life"}, &vm); err != nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Fatalf("after start runStrategy %v, err %v", vm.Spec.RunStrategy, err)
	}
	var vmi kubevirtv1.VirtualMachineInstance
	eventually(t, "VMI created", func(ctx context.Context) error {
		return fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "life"}, &vmi)
	})
	setVMIPhase(t, fx, ns, "life", kubevirtv1.Running, true)
	eventually(t, "running", vmStatus(fx, ns, "life", kubevirtv1.VirtualMachineStatusRunning))
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "start", ""); code != http.StatusConflict || !strings.Contains(msg, "VM is already running") {
		t.Errorf("start of a running VM: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "migrate", `{"addedNodeSelector":{"zone":"b"}}`); code != http.StatusAccepted {
		t.Fatalf("migrate: %d %q", code, msg)
	}
	var migrations kubevirtv1.VirtualMachineInstanceMigrationList
	if err := fx.client.List(ctx, &migrations, client.InNamespace(ns)); err != nil || len(migrations.Items) != 1 ||
		migrations.Items[0].Spec.VMIName != "life" || migrations.Items[0].Spec.AddedNodeSelector["zone"] != "b" {
		t.Fatalf("migrate created %+v (%v)", migrations.Items, err)
	}
	if err := fx.client.Delete(ctx, &migrations.Items[0]); err != nil {
		t.Fatal(err)
	}

	first := vmi.UID
	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "restart", ""); code != http.StatusAccepted {
		t.Fatalf("restart: %d %q", code, msg)
	}
	eventually(t, "a new VMI after restart", func(ctx context.Context) error {
		if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "life"}, &vmi); err != nil {
			return err
		}
		if vmi.UID == first {
			return errNotYet
		}
		return nil
	})

	if code, msg := command(t, fx.sidecar, ns, "virtualmachines", "life", "stop", ""); code != http.StatusAccepted {
		t.Fatalf("stop: %d %q", code, msg)
	}
	eventually(t, "stopped again", vmStatus(fx, ns, "life", kubevirtv1.VirtualMachineStatusStopped))
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "life"}, &vm); err != nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted {
		t.Fatalf("after stop runStrategy %v, err %v", vm.Spec.RunStrategy, err)
	}

	// VMI commands check the VMI before anything reaches a node.
	if err := fx.client.Create(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lone"}}); err != nil {
		t.Fatal(err)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachineinstances", "lone", "pause", ""); code != http.StatusConflict || msg != "Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io \"lone\": VM is not running" {
		t.Errorf("pause of a pending VMI: %d %q", code, msg)
	}
	if code, msg := command(t, fx.sidecar, ns, "virtualmachineinstances", "lone", "unpause", ""); code != http.StatusConflict || !strings.Contains(msg, "VMI is not paused") {
		t.Errorf("unpause: %d %q", code, msg)
	}
}

// RBAC decides through a SubjectAccessReview for the user the apiserver forwarded.
func TestCommandsNeedRBAC(t *testing.T) {
	fx := setup(t)
	virtAPIAddr := startVirtAPI(t, fx)
	ctx := testenv.Context(t)
	ns := fx.env.Namespace(t)
	if err := fx.client.Create(ctx, newVM(ns, "guarded", kubevirtv1.RunStrategyHalted)); err != nil {
		t.Fatal(err)
	}
	bob := rest.CopyConfig(fx.sidecar)
	bob.Impersonate = rest.ImpersonationConfig{UserName: "bob"}
	// The sidecar carries the admin's credentials, so impersonation works through it. The
	// apiserver authorizes aggregated requests itself first.
	code, msg := command(t, bob, ns, "virtualmachines", "guarded", "start", "")
	if code != http.StatusForbidden || !strings.Contains(msg, `User "bob" cannot update resource "virtualmachines/start" in API group "subresources.kubevirt.io"`) {
		t.Fatalf("start by bob without RBAC: %d %q", code, msg)
	}

	// virt-api checks again for itself, for the user the front proxy names.
	direct := func(cert *tls.Certificate, user string) (int, string) {
		cfg := &tls.Config{InsecureSkipVerify: true} // the test's own throwaway serving certificate
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		req, _ := http.NewRequest(http.MethodPut, "https://"+virtAPIAddr+"/apis/subresources.kubevirt.io/v1/namespaces/"+ns+"/virtualmachines/guarded/start", nil)
		req.Header.Set("X-Remote-User", user)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	pki := filepath.Join(filepath.Dir(fx.env.Kubeconfig), "pki")
	frontProxy, err := tls.LoadX509KeyPair(filepath.Join(pki, "front-proxy-client.crt"), filepath.Join(pki, "front-proxy-client.key"))
	if err != nil {
		t.Fatalf("front-proxy client certificate of the test stack: %v", err)
	}
	if code, body := direct(nil, "kubernetes-admin"); code != http.StatusUnauthorized {
		t.Errorf("a caller without the front-proxy certificate got %d: %s", code, body)
	}
	if code, body := direct(&frontProxy, "bob"); code != http.StatusForbidden || !strings.Contains(body, `user \"bob\" cannot update virtualmachines/start`) {
		t.Errorf("virt-api let bob through without RBAC: %d %s", code, body)
	}

	grantStart(t, fx, ns, "bob")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ = command(t, bob, ns, "virtualmachines", "guarded", "start", "")
		return code == http.StatusAccepted, nil
	})
	if err != nil {
		t.Fatalf("start by bob with RBAC: %d", code)
	}
}
