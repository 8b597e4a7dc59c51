package module

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/module"
)

// checkDVCR talks to the chart's DVCR pod on the local node as an importer and a puller would:
// the pusher pushes at :5000, the puller pulls at :5001 (the Service's 443) and may not push,
// anonymous may not pull; TLS with the chart's CA for dvcr.<namespace>.svc.
func checkDVCR(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=dvcr"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("DVCR's pod: %v %v", pods, err)
	}
	ip := pods.Items[0].Status.PodIP
	secret := func(name string) map[string][]byte {
		s, err := st.kube.CoreV1().Secrets(module.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret("dvcr-tls")["ca.crt"])
	// The certificate names the Service; the test reaches the pod by its address.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "dvcr." + module.Namespace + ".svc"}}
	user := func(secretName string) authn.Authenticator {
		var config struct {
			Auths map[string]struct{ Username, Password string }
		}
		if err := json.Unmarshal(secret(secretName)[".dockerconfigjson"], &config); err != nil {
			t.Fatal(err)
		}
		for _, a := range config.Auths {
			return &authn.Basic{Username: a.Username, Password: a.Password}
		}
		t.Fatalf("%s has no credentials", secretName)
		return nil
	}
	pusher, puller := user("dvcr-pusher"), user("dvcr-puller")
	push, err := name.ParseReference(net.JoinHostPort(ip, "5000") + "/cvi/e2e:latest")
	if err != nil {
		t.Fatal(err)
	}
	pull, err := name.ParseReference(net.JoinHostPort(ip, "5001") + "/cvi/e2e:latest")
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(push, img, remote.WithAuth(pusher), remote.WithTransport(tr), remote.WithContext(ctx)); err != nil {
		t.Fatalf("the pusher cannot push: %v", err)
	}
	got, err := remote.Image(pull, remote.WithAuth(puller), remote.WithTransport(tr), remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("the puller cannot pull: %v", err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Fatalf("pulled %s, pushed %s", d, want)
	}
	if err := remote.Write(pull, img, remote.WithAuth(puller), remote.WithTransport(tr), remote.WithContext(ctx)); err == nil {
		t.Error("the puller pushed")
	}
	if err := remote.Write(push, img, remote.WithAuth(puller), remote.WithTransport(tr), remote.WithContext(ctx)); err == nil {
		t.Error("the puller's credentials pushed at the push address")
	}
	if _, err := remote.Image(pull, remote.WithAuth(authn.Anonymous), remote.WithTransport(tr), remote.WithContext(ctx)); err == nil {
		t.Error("anonymous pulled")
	}
}
