// Package webhooks serves virt-api's validating and mutating admission webhooks for the kubevirt.io
// kinds. In production the apiserver calls the rewriter's webhook listener, which restores each
// AdmissionReview to kubevirt.io and forwards it here, so this package only ever sees upstream
// names. The decisions are pure functions (validate.go, mutate.go); the handlers only decode,
// dispatch and encode.
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
)

const (
	maxReviewBytes   = 8 << 20 // two objects of at most 3 MiB each, plus the envelope
	reviewAPIVersion = "admission.k8s.io/v1"
)

// Server answers AdmissionReviews.
type Server struct {
	// Reader reads kubevirt.io objects through the rewriter: the VirtualMachineInstancePresets
	// for the VMI mutator, the VMI a migration would move.
	Reader client.Reader
	// SystemUsers may change a VMI's spec after creation; KubeVirt allows only its own service
	// accounts, because spec changes must go through its subresources.
	SystemUsers map[string]bool
	Log         *slog.Logger
	// Decided, when set, learns every decision (for metrics).
	Decided func(path string, allowed bool)
}

type admitFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Handler routes the webhook paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for path, admit := range map[string]admitFunc{
		virtapicontract.PathVMICreate: s.validateVMICreate,
		virtapicontract.PathVMIUpdate: s.validateVMIUpdate,
		virtapicontract.PathVM:        s.validateVM,
		virtapicontract.PathVMIRS:     s.validateVMIRS,
		virtapicontract.PathMigration: s.validateMigration,
		virtapicontract.PathPreset:    s.validatePreset,
		virtapicontract.PathVMIMutate: s.mutateVMI,
		virtapicontract.PathVMMutate:  s.mutateVM,
	} {
		mux.Handle("POST "+path, s.serve(path, admit))
	}
	return mux
}

func (s *Server) serve(path string, admit admitFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		review, err := decodeReview(r.Body)
		if err != nil {
			s.Log.Warn("undecodable admission review", "path", path, "err", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := review.Request
		resp := admit(r.Context(), req)
		resp.UID = req.UID
		if s.Decided != nil {
			s.Decided(path, resp.Allowed)
		}
		if !resp.Allowed {
			s.Log.Info("denied", "path", path, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "user", req.UserInfo.Username, "message", resp.Result.Message)
		}
		out := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: "AdmissionReview"},
			Response: resp,
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&out); err != nil {
			s.Log.Error("writing admission response", "path", path, "err", err)
		}
	}
}

func decodeReview(body io.Reader) (*admissionv1.AdmissionReview, error) {
	raw, err := io.ReadAll(io.LimitReader(body, maxReviewBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read admission review: %w", err)
	}
	if len(raw) > maxReviewBytes {
		return nil, fmt.Errorf("admission review larger than %d bytes", maxReviewBytes)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &review); err != nil {
		return nil, fmt.Errorf("decode admission review: %w", err)
	}
	if review.Request == nil {
		return nil, fmt.Errorf("admission review without a request")
	}
	return &review, nil
}

// allow admits the request unchanged.
func allow() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

// deny answers as KubeVirt's webhookutils.ToAdmissionResponse does: 422 Invalid, the causes'
// messages joined by ", " as the message, and the causes themselves as details, so clients see the
// same text and can find the field.
func deny(causes []metav1.StatusCause) *admissionv1.AdmissionResponse {
	msgs := make([]string, 0, len(causes))
	for _, c := range causes {
		msgs = append(msgs, c.Message)
	}
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status:  metav1.StatusFailure,
		Message: strings.Join(msgs, ", "),
		Reason:  metav1.StatusReasonInvalid,
		Code:    http.StatusUnprocessableEntity,
		Details: &metav1.StatusDetails{Causes: causes},
	}}
}

// verdict allows when there are no causes.
func verdict(causes []metav1.StatusCause) *admissionv1.AdmissionResponse {
	if len(causes) == 0 {
		return allow()
	}
	return deny(causes)
}

// failed answers a request that could not be judged, as KubeVirt's ToAdmissionResponseError does.
func failed(code int32, err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Code: code}}
}

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// patched admits with a JSON patch; no operations means no patch at all.
func patched(ops []patchOp) *admissionv1.AdmissionResponse {
	if len(ops) == 0 {
		return allow()
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return failed(http.StatusInternalServerError, fmt.Errorf("encode patch: %w", err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: raw, PatchType: &pt}
}

// decodeObject reads the reviewed object (or the old one) into out.
func decodeObject(raw []byte, out any) error {
	if len(raw) == 0 {
		return fmt.Errorf("admission request without an object")
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode %T: %w", out, err)
	}
	return nil
}
