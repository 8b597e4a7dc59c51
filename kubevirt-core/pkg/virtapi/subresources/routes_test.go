package subresources

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/d8virt/kubevirt-core/pkg/buildinfo"
)

type fakeVersion struct {
	v   *version.Info
	err error
}

func (f fakeVersion) ServerVersion() (*version.Info, error) { return f.v, f.err }

func serve(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return rec.Code, rec.Body.String()
}

// The routes that need no VM: what no route takes, what KubeVirt has and the core does not, and
// the information routes.
func TestRoutesWithoutObjects(t *testing.T) {
	const g = "/apis/subresources.kubevirt.io/"
	s := &Server{Info: Info{
		Build: buildinfo.Info{GitVersion: "v1.2.3", GitCommit: "abc", Platform: "linux/amd64"},
		Kube:  fakeVersion{v: &version.Info{GitVersion: "v1.37.2"}},
	}}
	mux, info := s.routes()
	for _, tc := range []struct {
		method, path string
		code         int
		reason       metav1.StatusReason
		contains     string
	}{
		{"PUT", g + "v1/namespaces/ns/virtualmachines/vm/memorydump", 501, ReasonNotSupported, "virtualmachines/memorydump is not supported"},
		{"PUT", g + "v1alpha3/namespaces/ns/virtualmachines/vm/removememorydump", 501, ReasonNotSupported, "virtualmachines/removememorydump is not supported"},
		{"GET", g + "v1/namespaces/ns/virtualmachines/vm/expand-spec", 501, ReasonNotSupported, "expand-spec"},
		{"GET", g + "v1/namespaces/ns/virtualmachines/vm/objectgraph", 501, ReasonNotSupported, "objectgraph"},
		{"PUT", g + "v1/namespaces/ns/virtualmachineinstances/vm/evacuatecancel", 501, ReasonNotSupported, "virtualmachineinstances/evacuatecancel"},
		{"GET", g + "v1/namespaces/ns/virtualmachineinstances/vm/usbredir", 501, ReasonNotSupported, "usbredir"},
		{"GET", g + "v1/namespaces/ns/virtualmachineinstances/vm/sev/fetchcertchain", 501, ReasonNotSupported, "virtualmachineinstances/sev"},
		{"PUT", g + "v1/namespaces/ns/virtualmachineinstances/vm/sev/setupsession", 501, ReasonNotSupported, "virtualmachineinstances/sev"},
		{"GET", g + "v1/namespaces/ns/virtualmachineinstances/vm/vnc/screenshot", 501, ReasonNotSupported, "vnc/screenshot"},
		{"GET", g + "v1/namespaces/ns/virtualmachineinstances/vm/vsock", 501, ReasonNotSupported, "vsock"},
		{"PUT", g + "v1/namespaces/ns/expand-vm-spec", 501, ReasonNotSupported, "expand-vm-spec"},
		{"GET", g + "v1/start-cluster-profiler", 501, ReasonNotSupported, "start-cluster-profiler"},
		{"PUT", g + "v1/namespaces/ns/virtualmachines/vm/nonsense", 404, metav1.StatusReasonNotFound, "could not find the requested resource"},
		{"GET", g + "v2/version", 404, metav1.StatusReasonNotFound, ""},
		{"GET", "/", 404, metav1.StatusReasonNotFound, ""},
		{"GET", g + "v1/namespaces/ns/virtualmachines/vm/start", 405, metav1.StatusReasonMethodNotAllowed, "GET is not allowed"},
		{"PUT", g + "v1/version", 405, metav1.StatusReasonMethodNotAllowed, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, body := serve(t, mux, tc.method, tc.path)
			var st metav1.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("not a Status: %v: %s", err, body)
			}
			if code != tc.code || int(st.Code) != tc.code || st.Reason != tc.reason || st.Kind != "Status" || !strings.Contains(st.Message, tc.contains) {
				t.Errorf("%d %s", code, body)
			}
		})
	}

	for _, v := range []string{"v1", "v1alpha3"} {
		code, body := serve(t, mux, "GET", g+v+"/version")
		if code != 200 || body != `{"gitVersion":"v1.2.3","gitCommit":"abc","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":"linux/amd64"}`+"\n" {
			t.Errorf("%s version: %d %s", v, code, body)
		}
		code, body = serve(t, mux, "GET", g+v+"/guestfs")
		if code != 200 || body != `{"registry":"","tag":"v1.2.3","digest":"","imagePrefix":"","gsImage":""}`+"\n" {
			t.Errorf("%s guestfs: %d %s", v, code, body)
		}
		code, body = serve(t, mux, "GET", g+v+"/")
		if code != 200 || !strings.Contains(body, `"groupVersion":"subresources.kubevirt.io/`+v+`"`) {
			t.Errorf("%s discovery: %d %s", v, code, body)
		}
	}
	for _, path := range []string{"/healthz", g + "v1/healthz", g + "v1alpha3/healthz"} {
		if !info[path] {
			t.Errorf("%s is not an information route", path)
		}
		code, body := serve(t, mux, "GET", path)
		if code != 200 || !strings.Contains(body, `"apiserver":{"connectivity":"ok","version":{"major":"","minor":"","gitVersion":"v1.37.2"`) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}

	s.Info.Kube = fakeVersion{err: errors.New("connection refused")}
	if code, body := serve(t, mux, "GET", "/healthz"); code != 500 || body != `{"apiserver":{"connectivity":"failed","error":"connection refused"}}`+"\n" {
		t.Errorf("healthz without an apiserver: %d %s", code, body)
	}
}

// Only the information routes answer a caller that is not the front proxy.
func TestHandlerAuthenticatesAllButInformation(t *testing.T) {
	s := &Server{Auth: &RequestHeader{}, Info: Info{Kube: fakeVersion{v: &version.Info{}}}}
	h := s.Handler()
	if code, _ := serve(t, h, "GET", "/apis/subresources.kubevirt.io/v1/version"); code != 200 {
		t.Errorf("version: %d", code)
	}
	if code, _ := serve(t, h, "GET", "/healthz"); code != 200 {
		t.Errorf("healthz: %d", code)
	}
	for _, p := range []string{"/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/memorydump", "/apis/subresources.kubevirt.io/v1", "/nope"} {
		if code, _ := serve(t, h, "PUT", p); code != 401 {
			t.Errorf("%s without the front proxy: %d", p, code)
		}
	}
}
