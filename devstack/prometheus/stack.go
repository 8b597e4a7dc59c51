package prometheus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/d8virt/devstack/controlplane"
	"github.com/d8virt/devstack/prometheus/scrapeconfig"
)

// Prometheus' namespace and account on the local stack. It scrapes as this account, which the
// chart's monitoring.scrapers binds to the metrics-reader ClusterRole
// (devstack/chart-values/local.yaml), and discovers its targets with it too.
const (
	Namespace = "d8v-prometheus"
	Account   = "prometheus"
	// DiscoveryRole lets the account read EndpointSlices, Services and Pods of the module's
	// namespace, what the endpointslice discovery role reads.
	DiscoveryRole = "prometheus-discovery"
)

// Grant creates the namespace and the account, and the Role and RoleBinding of discovery in
// moduleNamespace; what exists already is kept.
func Grant(ctx context.Context, kube kubernetes.Interface, moduleNamespace string) error {
	ignoreExists := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("namespace %s: %w", Namespace, err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: Account}}, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("service account %s/%s: %w", Namespace, Account, err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: DiscoveryRole, Namespace: moduleNamespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	if _, err := kube.RbacV1().Roles(moduleNamespace).Create(ctx, role, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("role %s/%s: %w", moduleNamespace, DiscoveryRole, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: DiscoveryRole, Namespace: moduleNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: DiscoveryRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Account, Namespace: Namespace}},
	}
	if _, err := kube.RbacV1().RoleBindings(moduleNamespace).Create(ctx, binding, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("role binding %s/%s: %w", moduleNamespace, DiscoveryRole, err)
	}
	return nil
}

// Token is a token of the account namespace/name (TokenRequest) valid for ttl.
func Token(ctx context.Context, kube kubernetes.Interface, namespace, name string, ttl time.Duration) (string, error) {
	secs := int64(ttl / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// OnStack says how to run Prometheus on a stack for the module's namespace.
type OnStack struct {
	Stack           *controlplane.Stack
	ModuleNamespace string
	// Dir is the server's directory; Addr its listen address (host:port).
	Dir, Addr string
	// ScrapeInterval is the default interval; TokenTTL how long its token lasts.
	ScrapeInterval string
	TokenTTL       time.Duration
	// SDBin is the program that keeps the targets current (SDDaemon).
	SDBin string
}

// CertsDir holds the CA files the scrape configuration names (scrapeconfig.Env.FilesDir).
func (o OnStack) CertsDir() string { return filepath.Join(o.Dir, "certs") }

// Write grants the account (Grant), writes its token, and generates srv's scrape configuration
// from the ServiceMonitors of the module's namespace and the targets discovered with the
// account's token (scrapeconfig.Write), with the CA files, the namespaces SDDaemon watches and
// its kubeconfig. Written again while the server runs (after a reinstall gave the module new
// certificates), it refreshes the CA files too; Prometheus rereads them by itself.
func (o OnStack) Write(ctx context.Context, srv Server) error {
	cfg, err := o.Stack.RESTConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := Grant(ctx, kube, o.ModuleNamespace); err != nil {
		return err
	}
	token, err := Token(ctx, kube, Namespace, Account, o.TokenTTL)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	tokenFile := filepath.Join(o.Dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	// Prometheus discovers the targets with its own account, as it would in a cluster.
	discovery, err := kubernetes.NewForConfig(&rest.Config{Host: cfg.Host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: o.Stack.CAFile()}})
	if err != nil {
		return err
	}
	env := scrapeconfig.Env{
		TargetsDir: srv.TargetsDir(), ServiceAccountTokenFile: tokenFile,
		FilesDir: o.CertsDir(), ScrapeInterval: o.ScrapeInterval,
	}
	clients := scrapeconfig.Clients{Operator: kube, Dynamic: dyn, Discovery: discovery}
	needs, err := scrapeconfig.Write(ctx, clients, o.ModuleNamespace, env, srv.ConfigFile())
	if err != nil {
		return err
	}
	if err := os.WriteFile(srv.NamespacesFile(), []byte(strings.Join(needs.Namespaces, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return writeSDKubeconfig(srv.SDKubeconfig(), cfg.Host, o.Stack.CAFile(), tokenFile)
}

// Run writes the configuration (Write), checks it with promtool, and starts the server and
// SDDaemon, which keeps the targets current with the same token, as stack components. It returns
// the server and a function that stops both (they stop with the stack too).
func (o OnStack) Run(ctx context.Context) (Server, func() error, error) {
	srv, err := New(o.Dir, o.Addr)
	if err != nil {
		return Server{}, nil, err
	}
	if err := o.Write(ctx, srv); err != nil {
		return Server{}, nil, err
	}
	if out, err := exec.CommandContext(ctx, "promtool", "check", "config", srv.ConfigFile()).CombinedOutput(); err != nil {
		return Server{}, nil, fmt.Errorf("promtool check config: %w\n%s", err, out)
	}
	comps := []controlplane.Component{srv.SDComponent(o.SDBin), srv.Component()}
	o.Stack.AddComponents(comps...)
	stop := func() error {
		var errs []error
		for _, c := range comps {
			errs = append(errs, o.Stack.StopComponent(c, 15*time.Second))
		}
		return errors.Join(errs...)
	}
	if err := o.Stack.Up(ctx); err != nil {
		return Server{}, nil, errors.Join(fmt.Errorf("prometheus: %w", err), stop())
	}
	return srv, stop, nil
}

// writeSDKubeconfig is a kubeconfig for server with the CA in caFile and the token in tokenFile
// (client-go rereads it).
func writeSDKubeconfig(path, server, caFile, tokenFile string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stack"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos[Account] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	cfg.Contexts["prometheus"] = &clientcmdapi.Context{Cluster: "stack", AuthInfo: Account}
	cfg.CurrentContext = "prometheus"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("prometheus-sd kubeconfig: %w", err)
	}
	return nil
}
