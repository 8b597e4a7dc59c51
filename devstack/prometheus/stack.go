package prometheus

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
}

// CertsDir holds the CA files the scrape configuration names (scrapeconfig.Env.FilesDir).
func (o OnStack) CertsDir() string { return filepath.Join(o.Dir, "certs") }

// Write grants the account (Grant), writes its token, and generates the scrape configuration
// from the ServiceMonitors of the module's namespace and the targets discovered with the
// account's token (scrapeconfig.Write) into configFile and the files next to it. Written again
// while the server runs, after the module's pods changed, it refreshes the targets and CA files,
// which Prometheus rereads by itself.
func (o OnStack) Write(ctx context.Context, configFile string) error {
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
		TargetsDir: filepath.Join(o.Dir, "targets"), ServiceAccountTokenFile: tokenFile,
		FilesDir: o.CertsDir(), ScrapeInterval: o.ScrapeInterval,
	}
	clients := scrapeconfig.Clients{Operator: kube, Dynamic: dyn, Discovery: discovery}
	return scrapeconfig.Write(ctx, clients, o.ModuleNamespace, env, configFile)
}

// Run writes the configuration (Write), checks it with promtool, and starts the server as a
// stack component. It returns the server and its component, which stops with the stack or by
// StopComponent.
func (o OnStack) Run(ctx context.Context) (Server, controlplane.Component, error) {
	srv, err := New(o.Dir, o.Addr)
	if err != nil {
		return Server{}, controlplane.Component{}, err
	}
	if err := o.Write(ctx, srv.ConfigFile()); err != nil {
		return Server{}, controlplane.Component{}, err
	}
	if out, err := exec.CommandContext(ctx, "promtool", "check", "config", srv.ConfigFile()).CombinedOutput(); err != nil {
		return Server{}, controlplane.Component{}, fmt.Errorf("promtool check config: %w\n%s", err, out)
	}
	comp := srv.Component()
	o.Stack.AddComponents(comp)
	if err := o.Stack.Up(ctx); err != nil {
		return Server{}, controlplane.Component{}, fmt.Errorf("prometheus: %w", err)
	}
	return srv, comp, nil
}
