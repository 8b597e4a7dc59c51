package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/d8virt/kubevirt-core/pkg/buildinfo"
	"github.com/d8virt/kubevirt-core/pkg/virtapi/subresources"
)

// call sends method to /apis/subresources.kubevirt.io/<path> through cfg (the rewriter sidecar)
// with client-go's REST client, as KubeVirt's client does, and returns the code, the body and the
// decoded Status of a failure (nil on success).
func call(t *testing.T, cfg *rest.Config, method, path string, query map[string]string, body string) (int, []byte, *metav1.Status) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := kube.CoreV1().RESTClient().Verb(method).AbsPath("/apis/subresources.kubevirt.io", path)
	for k, v := range query {
		req = req.Param(k, v)
	}
	if body != "" {
		req = req.Body([]byte(body)).SetHeader("Content-Type", "application/json")
	}
	res := req.Do(context.Background())
	var code int
	res.StatusCode(&code)
	raw, _ := res.Raw()
	// Error, not Raw's error: it decodes the Status the server sent, as KubeVirt's client shows it.
	if err := res.Error(); err != nil {
		se, ok := err.(apierrors.APIStatus)
		if !ok {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		st := se.Status()
		return code, raw, &st
	}
	return code, raw, nil
}

// An unmodified KubeVirt client asks for the server's version (after any error, too), guestfs and
// healthz; the routes KubeVirt has and the core does not answer 501 Statuses naming the route,
// others a 404 Status, through the apiserver's aggregation and the rewriter.
func TestSubresourceInfoAndUnsupportedRoutes(t *testing.T) {
	fx := setup(t)
	startVirtAPI(t, fx)
	ns := fx.env.Namespace(t)
	want := buildinfo.Get()

	for _, v := range []string{"v1", "v1alpha3"} {
		code, raw, st := call(t, fx.sidecar, http.MethodGet, v+"/version", nil, "")
		var got buildinfo.Info
		if st != nil || code != http.StatusOK || json.Unmarshal(raw, &got) != nil || got != want {
			t.Errorf("%s version: %d %s (%v), want %+v", v, code, raw, st, want)
		}
		code, raw, st = call(t, fx.sidecar, http.MethodGet, v+"/guestfs", nil, "")
		var gs subresources.GuestfsInfo
		if st != nil || code != http.StatusOK || json.Unmarshal(raw, &gs) != nil || gs.Tag != want.GitVersion {
			t.Errorf("%s guestfs: %d %s (%v)", v, code, raw, st)
		}
		code, raw, st = call(t, fx.sidecar, http.MethodGet, v+"/healthz", nil, "")
		var health struct {
			APIServer struct {
				Connectivity string `json:"connectivity"`
				Version      struct {
					GitVersion string `json:"gitVersion"`
				} `json:"version"`
			} `json:"apiserver"`
		}
		if st != nil || code != http.StatusOK || json.Unmarshal(raw, &health) != nil || health.APIServer.Connectivity != "ok" ||
			!strings.HasPrefix(health.APIServer.Version.GitVersion, "v1.") {
			t.Errorf("%s healthz: %d %s (%v)", v, code, raw, st)
		}
	}

	for _, tc := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
		msg          string
	}{
		{http.MethodPut, "v1/namespaces/" + ns + "/virtualmachines/vm/memorydump", http.StatusNotImplemented, subresources.ReasonNotSupported, "virtualmachines/memorydump is not supported"},
		{http.MethodPut, "v1/namespaces/" + ns + "/virtualmachines/vm/removememorydump", http.StatusNotImplemented, subresources.ReasonNotSupported, "virtualmachines/removememorydump is not supported"},
		{http.MethodPut, "v1/namespaces/" + ns + "/virtualmachineinstances/vm/evacuatecancel", http.StatusNotImplemented, subresources.ReasonNotSupported, "virtualmachineinstances/evacuatecancel is not supported"},
		{http.MethodGet, "v1/namespaces/" + ns + "/virtualmachineinstances/vm/usbredir", http.StatusNotImplemented, subresources.ReasonNotSupported, "usbredir"},
		{http.MethodGet, "v1/namespaces/" + ns + "/virtualmachines/vm/expand-spec", http.StatusNotImplemented, subresources.ReasonNotSupported, "expand-spec"},
		{http.MethodGet, "v1/namespaces/" + ns + "/virtualmachines/vm/objectgraph", http.StatusNotImplemented, subresources.ReasonNotSupported, "objectgraph"},
		{http.MethodGet, "v1alpha3/namespaces/" + ns + "/virtualmachineinstances/vm/sev/fetchcertchain", http.StatusNotImplemented, subresources.ReasonNotSupported, "virtualmachineinstances/sev"},
		{http.MethodPut, "v1/namespaces/" + ns + "/virtualmachines/vm/frobnicate", http.StatusNotFound, metav1.StatusReasonNotFound, "could not find the requested resource"},
		{http.MethodGet, "v1/namespaces/" + ns + "/virtualmachines/vm/start", http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "GET is not allowed"},
	} {
		code, raw, st := call(t, fx.sidecar, tc.method, tc.path, nil, "")
		if st == nil || code != tc.code || int(st.Code) != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.msg) {
			t.Errorf("%s %s: %d %s (%+v)", tc.method, tc.path, code, raw, st)
		}
	}
}

// The information routes need no front-proxy certificate (a probe calls healthz), every other
// route does.
func TestSubresourceInfoWithoutFrontProxy(t *testing.T) {
	fx := setup(t)
	addr := startVirtAPI(t, fx)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second} // the test's own serving certificate
	for path, want := range map[string]int{
		"/healthz": http.StatusOK,
		"/apis/subresources.kubevirt.io/v1/healthz":                              http.StatusOK,
		"/apis/subresources.kubevirt.io/v1alpha3/version":                        http.StatusOK,
		"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/x/stop": http.StatusUnauthorized,
	} {
		resp, err := c.Get("https://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s without a client certificate: %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
}
