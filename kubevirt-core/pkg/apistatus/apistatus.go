// Package apistatus writes Kubernetes-style answers from the core's own HTTP servers (virt-api's
// subresources, virt-handler's API), so that kubectl and virtctl show their errors as they would
// any apiserver's.
package apistatus

import (
	"encoding/json"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Write answers with the error as a v1 Status and its code.
func Write(w http.ResponseWriter, serr *apierrors.StatusError) {
	st := serr.ErrStatus.DeepCopy()
	st.Kind, st.APIVersion = "Status", "v1"
	WriteJSON(w, int(st.Code), st)
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
