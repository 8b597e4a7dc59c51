package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/devstack/testenv"
)

const aggGroup = "aggtest.stack.test.d8v.io"

// aggServer is a minimal aggregated API server: it trusts only the front-proxy client certificate
// and answers with the identity the apiserver forwarded in the request headers.
func aggServer(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/"+aggGroup+"/v1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": aggGroup + "/v1",
			"resources": []any{map[string]any{"name": "echoes", "namespaced": true, "kind": "Echo", "verbs": []string{"get"}}},
		})
	})
	mux.HandleFunc("/apis/"+aggGroup+"/v1/namespaces/{ns}/echoes/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"kind": "Echo", "apiVersion": aggGroup + "/v1",
			"metadata": map[string]any{"name": r.PathValue("name"), "namespace": r.PathValue("ns")},
			"user":     r.Header.Get("X-Remote-User"),
			"groups":   r.Header.Values("X-Remote-Group"),
		})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || r.TLS.VerifiedChains[0][0].Subject.CommonName != "front-proxy-client" {
			http.Error(w, "only the front proxy may call", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func TestAggregatedAPIThroughFrontProxy(t *testing.T) {
	env := testenv.Get(t)
	ctx := testenv.Context(t)
	ns := env.Namespace(t)
	host := env.Host(t, "aggapi")

	auth, err := env.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("front-proxy CA: %v", err)
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM([]byte(auth.Data["requestheader-client-ca-file"])) {
		t.Fatal("extension-apiserver-authentication has no requestheader-client-ca-file")
	}
	svcName := "aggapi." + ns + ".svc"
	cert, caPEM := testenv.ServingCert(t, []string{svcName}, nil)
	ln, err := host.Listen("tcp", net.JoinHostPort(host.IP.String(), "8443"))
	if err != nil {
		t.Fatalf("listen in test host: %v", err)
	}
	srv := &http.Server{Handler: aggServer(t), TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: clientCAs, ClientAuth: tls.VerifyClientCertIfGiven,
	}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	env.ExposeService(t, ns, "aggapi", host.IP.String(), 8443)

	env.RegisterAPIService(t, aggGroup, "v1", ns, "aggapi", caPEM)

	body, err := env.Kube.Discovery().RESTClient().Get().
		AbsPath("/apis", aggGroup, "v1", "namespaces", ns, "echoes", "hello").DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET through the aggregator: %v", err)
	}
	var echo struct {
		Metadata struct{ Name string }
		User     string
		Groups   []string
	}
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if echo.Metadata.Name != "hello" || echo.User != "kubernetes-admin" || !strings.Contains(fmt.Sprint(echo.Groups), "system:masters") {
		t.Fatalf("aggregated server saw %+v, want user kubernetes-admin in system:masters", echo)
	}
}
