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
	d := dvcrAccess(t, ctx, st)
	tr, pusher, puller := d.tr, d.pusher, d.puller
	push, err := name.ParseReference(net.JoinHostPort(d.ip, "5000") + "/cvi/e2e:latest")
	if err != nil {
		t.Fatal(err)
	}
	pull, err := name.ParseReference(net.JoinHostPort(d.ip, "5001") + "/cvi/e2e:latest")
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
	// A new image each: pushing what is already there uploads nothing and succeeds.
	for what, ref := range map[string]name.Reference{"at the pull address": pull, "at the push address": push} {
		other, err := random.Image(1024, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, other, remote.WithAuth(puller), remote.WithTransport(tr), remote.WithContext(ctx)); err == nil {
			t.Errorf("the puller pushed %s", what)
		}
	}
	if _, err := remote.Image(pull, remote.WithAuth(authn.Anonymous), remote.WithTransport(tr), remote.WithContext(ctx)); err == nil {
		t.Error("anonymous pulled")
	}
}

// dvcr is how the test reaches the chart's DVCR pod: its address, a transport trusting the
// chart's CA for dvcr.<namespace>.svc, and the pusher's and puller's credentials.
type dvcr struct {
	ip             string
	tr             http.RoundTripper
	pusher, puller authn.Authenticator
	caPEM          []byte
}

func dvcrAccess(t *testing.T, ctx context.Context, st *stack) dvcr {
	t.Helper()
	pods, err := st.kube.CoreV1().Pods(module.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=dvcr"})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("DVCR's pod: %v %v", pods, err)
	}
	secret := func(name string) map[string][]byte {
		s, err := st.kube.CoreV1().Secrets(module.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	d := dvcr{ip: pods.Items[0].Status.PodIP, caPEM: secret("dvcr-tls")["ca.crt"]}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(d.caPEM)
	// The certificate names the Service; the test reaches the pod by its address.
	d.tr = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "dvcr." + module.Namespace + ".svc"}}
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
	d.pusher, d.puller = user("dvcr-pusher"), user("dvcr-puller")
	return d
}
