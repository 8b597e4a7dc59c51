package subresources

import (
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

// unsupportedBelow are KubeVirt routes below a subresource the core serves.
var unsupportedBelow = []string{"virtualmachineinstances/vnc/screenshot"}

// unsupportedRoutes answers every KubeVirt route the core does not serve, whatever the method,
// with NotSupported: a client learns at once that the feature is missing here rather than that
// the VM is.
func unsupportedRoutes(mux *http.ServeMux, prefix string) {
	have := served()
	for resource, subs := range virtapicontract.KubeVirtSubresources {
		for _, sub := range subs {
			if have[resource+"/"+sub] {
				continue
			}
			base := prefix + "/namespaces/{ns}/" + resource + "/{name}/" + sub
			h := notSupported(resource + "/" + sub)
			mux.HandleFunc(base, h)
			mux.HandleFunc(base+"/", h)
		}
	}
	for _, route := range unsupportedBelow {
		resource, sub, _ := strings.Cut(route, "/")
		mux.HandleFunc(prefix+"/namespaces/{ns}/"+resource+"/{name}/"+sub, notSupported(route))
	}
	for _, route := range virtapicontract.KubeVirtGroupRoutes {
		h := notSupported(route)
		mux.HandleFunc(prefix+"/"+route, h)
		mux.HandleFunc(prefix+"/namespaces/{ns}/"+route, h)
	}
}

func notSupported(route string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		apistatus.Write(w, NotSupported(route, r.PathValue("name")))
	}
}

// NotSupported is the answer to a KubeVirt route the core does not implement: 501 Not
// Implemented. The request is KubeVirt's and well-formed (so not 400), the route exists (so not
// 404, which clients read as a missing VM); the server lacks the feature, which is what 501 says,
// and clients do not retry it. The Status names the route in its details.
func NotSupported(route, name string) *apierrors.StatusError {
	serr := failure(http.StatusNotImplemented, ReasonNotSupported, fmt.Sprintf("%s is not supported by this virtualization module's KubeVirt core", route))
	serr.ErrStatus.Details = &metav1.StatusDetails{Group: virtapicontract.SubresourcesGroup, Kind: route, Name: name}
	return serr
}

// ReasonNotSupported is the Status reason of NotSupported (metav1 defines none for 501).
const ReasonNotSupported metav1.StatusReason = "NotSupported"

// unrouted is the answer to a request no route took: 405 when the path is served with another
// method, else 404.
func unrouted(mux *http.ServeMux, r *http.Request) *apierrors.StatusError {
	for _, m := range []string{http.MethodGet, http.MethodPut} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "/" && pattern != "" {
			return failure(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path))
		}
	}
	return failure(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("the server could not find the requested resource %s", r.URL.Path))
}

func failure(code int32, reason metav1.StatusReason, msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}
