package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/testenv"
	"github.com/d8virt/kubevirt-core/pkg/virtoperator"
)

// saToken is a token of the namespace's account name, as a kubelet projects it.
func saToken(ctx context.Context, t *testing.T, fx *fixture, ns, name string) string {
	t.Helper()
	tr, err := fx.env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// accountKubeconfig is what in-cluster configuration gives a pod of the account: the apiserver,
// its CA and the account's token.
func accountKubeconfig(t *testing.T, fx *fixture, path, token string) {
	t.Helper()
	c := fx.env.Config
	cluster := &clientcmdapi.Cluster{Server: c.Host, CertificateAuthority: c.CAFile, CertificateAuthorityData: c.CAData}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"account": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"account": {Cluster: "cluster", AuthInfo: "account"}},
		CurrentContext: "account",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
}

// checkMetricsProxy runs the real kube-rbac-proxy (the machine-wide cache's build) with the
// arguments the operator gave virt-handler's, its certificate and the handler account's token,
// in front of a stand-in metrics listener, and scrapes it: without a token, with a token of an
// account that is not a metrics reader, and with one that is.
func checkMetricsProxy(t *testing.T, fx *fixture, ns string) {
	ctx := testenv.Context(t)
	bin := filepath.Join(controlplane.BinDir(), "kube-rbac-proxy")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no kube-rbac-proxy (make deps builds it): %v", err)
	}
	var ds appsv1.DaemonSet
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: virtoperator.HandlerName}, &ds); err != nil {
		t.Fatal(err)
	}
	var proxy *corev1.Container
	for i, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == virtoperator.KubeRBACProxyName {
			proxy = &ds.Spec.Template.Spec.Containers[i]
		}
	}
	if proxy == nil || len(proxy.VolumeMounts) != 1 {
		t.Fatalf("virt-handler's kube-rbac-proxy %+v", proxy)
	}
	var secret, ca corev1.Secret
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: virtoperator.HandlerMetricsCertSecret}, &secret); err != nil {
		t.Fatal(err)
	}
	if err := fx.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: virtoperator.CASecret}, &ca); err != nil {
		t.Fatal(err)
	}

	// What the kubelet would give the container: its certificate volume and the account's
	// credentials. The listener and the upstream move to free loopback ports of this host.
	dir := t.TempDir()
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), secret.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	accountKubeconfig(t, fx, kubeconfig, saToken(ctx, t, fx, ns, virtoperator.HandlerServiceAccount))
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "# TYPE stand_in_metric gauge\nstand_in_metric{path=%q} 1\n", r.URL.Path)
	}))
	defer upstream.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var args []string
	for _, a := range proxy.Args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--secure-listen-address":
			a = name + "=" + addr
		case "--upstream":
			a = name + "=" + upstream.URL + "/"
		default:
			a = strings.ReplaceAll(a, proxy.VolumeMounts[0].MountPath, dir)
		}
		args = append(args, a)
	}
	args = append(args, "--kubeconfig="+kubeconfig)
	out := &testenv.SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kube-rbac-proxy %v:\n%s", args, out.String())
		}
	}()

	// A scraper checks the proxy's certificate against the installation's CA, for the name of
	// virt-handler's metrics Service.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.Data["ca.crt"]) {
		t.Fatal("no CA bundle")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: virtoperator.MetricsService(virtoperator.HandlerName) + "." + ns + ".svc",
	}}}
	scrape := func(ctx context.Context, path, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}

	// Two accounts: one bound to the metrics reader, one not.
	for _, name := range []string{"scraper", "stranger"} {
		if _, err := fx.env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := "metrics-scraper-" + ns
	if _, err := fx.env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: virtoperator.MetricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = fx.env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{})
	}()
	scraper, stranger := saToken(ctx, t, fx, ns, "scraper"), saToken(ctx, t, fx, ns, "stranger")

	for _, tt := range []struct {
		name, path, token string
		want              int
		body              string
	}{
		{"the metrics reader", "/metrics", scraper, http.StatusOK, `stand_in_metric{path="/metrics"} 1`},
		{"no token", "/metrics", "", http.StatusUnauthorized, ""},
		{"a token the apiserver did not issue", "/metrics", "not-a-token", http.StatusUnauthorized, ""},
		{"an account that is no metrics reader", "/metrics", stranger, http.StatusForbidden, ""},
		{"another path", "/debug/pprof/", scraper, http.StatusNotFound, ""},
	} {
		// The first scrapes wait for the proxy to listen and for the binding to reach the
		// apiserver's authorizer.
		eventually(t, tt.name, func(ctx context.Context) error {
			code, body, err := scrape(ctx, tt.path, tt.token)
			if err != nil {
				return err
			}
			if code != tt.want || !strings.Contains(body, tt.body) {
				return fmt.Errorf("%s: %d %q, want %d with %q", tt.path, code, body, tt.want, tt.body)
			}
			return nil
		})
	}
}
