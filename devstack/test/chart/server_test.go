package chart

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/prometheus"
	"github.com/d8virt/devstack/testenv"
)

// cert-manager's release whose Certificate and Issuer CRDs the dry run validates the chart's
// custom resources against (with prometheus-operator's, prometheus.OperatorModule), fetched as a
// Go module (the module proxy serves the repository's files).
const certManager = "github.com/cert-manager/cert-manager@v1.21.2"

// installCRDs installs the chart's CRDs (what helm installs from crds/ before the templates),
// prometheus-operator's and cert-manager's, so that the chart's custom resources can be validated.
func installCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	crds, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if len(crds) == 0 {
		t.Fatal("the chart has no CRDs")
	}
	cm := filepath.Join(testenv.ModuleDir(t, certManager), "deploy", "crds")
	crds = append(crds, prometheus.OperatorCRDFiles(testenv.ModuleDir(t, prometheus.OperatorModule))...)
	crds = append(crds,
		filepath.Join(cm, "cert-manager.io_certificates.yaml"),
		filepath.Join(cm, "cert-manager.io_issuers.yaml"),
	)
	env.InstallCRDFiles(t, crds...)
}

// The rendered chart, with default and with non-default values (cert-manager among them), is
// accepted by the apiserver:
// every object passes validation and admission (kubectl apply --dry-run=server) in a fresh
// namespace, with the chart's own CRDs installed.
func TestServerSideDryRun(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	installCRDs(t, env)
	ns := env.Namespace(t)
	for name, args := range map[string][]string{
		"default": nil,
		"custom":  {"-f", testdata(t, "values-custom.yaml")},
		// cert-manager issues the serving certificate: the chart's own CA, or the platform's issuer.
		"cert-manager":        {"--set", "certManager.enabled=true"},
		"cert-manager-issuer": {"--set", "certManager.enabled=true,certManager.issuerRef.name=platform-ca"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			all := append([]string{"template", release, chartDir(t), "--namespace", ns}, args...)
			all = append(all, monitoringAPIs...)
			manifest, err := helm(t, all...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, manifest)
			}
			// The release's namespace, and the few objects that live elsewhere (virtualization-api's
			// RoleBinding to the authentication reader in kube-system), each namespace by itself:
			// kubectl refuses an object of another namespace than -n.
			byNS := map[string][]any{}
			for _, o := range decode(t, manifest) {
				at := o.GetNamespace()
				if at == "" {
					at = ns
				}
				byNS[at] = append(byNS[at], o.Object)
			}
			var out string
			for at, objs := range byNS {
				list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
				if err != nil {
					t.Fatal(err)
				}
				o, err := testenv.KubectlInput(t, env.Kubeconfig, string(list), "apply", "--dry-run=server", "--validate=strict", "-n", at, "-f", "-")
				if err != nil {
					t.Fatalf("kubectl apply --dry-run=server -n %s: %v\n%s", at, err, o)
				}
				out += o
			}
			// One line per object: every object of the render was sent.
			if got, want := strings.Count(out, "(server dry run)"), len(decode(t, manifest)); got != want {
				t.Errorf("%d objects dry-run applied, %d rendered:\n%s", got, want, out)
			}
		})
	}
}

// helm install --dry-run=server renders with lookup: an existing serving certificate is kept
// while it is far from expiry, and issued anew when it is close to it.
func TestServingCertificateKeptAcrossUpgrades(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	installCRDs(t, env)
	ns := env.Namespace(t)
	ctx := testenv.Context(t)
	svc := "virt-operator-metrics"
	pair, _ := testenv.ServingCert(t, []string{svc}, nil)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pair.Certificate[0]})
	keyDER, err := x509.MarshalPKCS8PrivateKey(pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	names := strings.Join([]string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}, ",")
	secret := &corev1.Secret{
		// As an earlier release of the chart left it.
		ObjectMeta: metav1.ObjectMeta{
			Name:   "virt-operator-metrics-tls",
			Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{
				"meta.helm.sh/release-name":             release,
				"meta.helm.sh/release-namespace":        ns,
				"virtualization.deckhouse.io/dns-names": names,
			},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": certPEM},
	}
	renderSecret := func() string {
		t.Helper()
		out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--dry-run=server", "--kubeconfig", env.Kubeconfig)
		if err != nil {
			t.Fatalf("helm install --dry-run=server: %v\n%s", err, out)
		}
		for _, o := range decode(t, manifestOf(out)) {
			if o.GetKind() == "Secret" && o.GetName() == secret.Name {
				crt, _, _ := unstructuredString(o.Object, "data", "tls.crt")
				return crt
			}
		}
		t.Fatalf("no Secret %s in the dry run:\n%s", secret.Name, out)
		return ""
	}
	kept := base64.StdEncoding.EncodeToString(certPEM)
	for _, tc := range []struct {
		name     string
		notAfter time.Time
		keep     bool
	}{
		{"far from expiry", time.Now().Add(200 * 24 * time.Hour), true},
		{"close to expiry", time.Now().Add(10 * 24 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := secret.DeepCopy()
			s.Annotations["virtualization.deckhouse.io/not-after"] = tc.notAfter.UTC().Format(time.RFC3339)
			api := env.Kube.CoreV1().Secrets(ns)
			_ = api.Delete(ctx, s.Name, metav1.DeleteOptions{})
			if _, err := api.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := renderSecret(); (got == kept) != tc.keep {
				t.Errorf("tls.crt %.20s...: kept %v, want kept %v", got, got == kept, tc.keep)
			}
		})
	}
}

// manifestOf cuts the MANIFEST section out of helm install --dry-run's report.
func manifestOf(out string) string {
	_, m, ok := strings.Cut(out, "\nMANIFEST:\n")
	if !ok {
		return ""
	}
	m, _, _ = strings.Cut(m, "\nNOTES:\n")
	return m
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}
