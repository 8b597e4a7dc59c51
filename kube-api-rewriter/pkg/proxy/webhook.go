package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// maxReviewBytes bounds an AdmissionReview; the apiserver's own request limit is 3 MiB per object,
// and a review carries two.
const maxReviewBytes = 8 << 20

// Webhook restores AdmissionReviews for the component's webhook server and renames the patch of
// its response on the way back.
type Webhook struct {
	Rewriter *rewrite.Rewriter
	// Target is the component's webhook server, e.g. https://127.0.0.1:9443.
	Target *url.URL
	Client *http.Client
	// Metrics may be nil.
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

var _ http.Handler = (*Webhook)(nil)

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	code := h.serve(w, r)
	if h.Metrics != nil {
		h.Metrics.Requests.WithLabelValues("webhook", "admissionreviews", "create", fmt.Sprint(code)).Inc()
		h.Metrics.Duration.WithLabelValues("webhook", "create").Observe(time.Since(start).Seconds())
	}
}

func (h *Webhook) serve(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		WriteStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "kube-api-rewriter: webhooks take POST")
		return http.StatusMethodNotAllowed
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil || len(body) > maxReviewBytes {
		WriteStatus(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "kube-api-rewriter: AdmissionReview unreadable or too large")
		return http.StatusRequestEntityTooLarge
	}
	h.count("in", len(body))
	restored, err := h.Rewriter.AdmissionReview(rewrite.Restore, body, rewrite.Target{})
	if err != nil {
		return h.fail(w, "restore", err)
	}
	path := r.URL.Path
	if p, ok := h.Rewriter.Rules().WebhookPath(rewrite.Restore, path); ok {
		path = p
	}
	target := *h.Target
	target.Path, target.RawQuery = path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target.String(), bytes.NewReader(restored))
	if err != nil {
		return h.fail(w, "forward", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := h.Client.Do(req)
	if err != nil {
		WriteStatus(w, http.StatusBadGateway, "ServiceUnavailable", fmt.Sprintf("kube-api-rewriter: webhook server: %v", err))
		return http.StatusBadGateway
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxReviewBytes))
	if err != nil {
		return h.fail(w, "read answer", err)
	}
	// Only a patch speaks of the object and needs renaming. Denials and warnings are the
	// component's words for a human: renaming their free text would garble them ("kubevirt.io/x"
	// would become "internal.virtualization.deckhouse.io/x"), so they pass verbatim.
	if resp.StatusCode == http.StatusOK && hasPatch(answer) {
		answer, err = h.Rewriter.AdmissionReview(rewrite.Rename, answer, requestKind(restored))
		if err != nil {
			return h.fail(w, "rename answer", err)
		}
	}
	h.count("out", len(answer))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	return resp.StatusCode
}

// hasPatch reports whether an AdmissionReview answer carries a patch; an answer that is not JSON
// is treated as having one, so that the rename reports it.
func hasPatch(answer []byte) bool {
	var ar struct {
		Response *struct {
			Patch json.RawMessage `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(answer, &ar); err != nil {
		return true
	}
	return ar.Response != nil && len(ar.Response.Patch) > 0 && string(ar.Response.Patch) != "null"
}

// requestKind is the reviewed object's kind in the component's view; the response patch is
// written against it.
func requestKind(review []byte) rewrite.Target {
	var ar struct {
		Request struct {
			Kind struct{ Group, Kind string } `json:"kind"`
		} `json:"request"`
	}
	_ = json.Unmarshal(review, &ar)
	return rewrite.Target{Group: ar.Request.Kind.Group, Kind: ar.Request.Kind.Kind}
}

func (h *Webhook) fail(w http.ResponseWriter, step string, err error) int {
	if h.Metrics != nil {
		h.Metrics.RewriteErrors.WithLabelValues("admission_review", step).Inc()
	}
	h.Log.Error("webhook", "step", step, "err", err)
	WriteStatus(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("kube-api-rewriter: %s: %v", step, err))
	return http.StatusBadRequest
}

func (h *Webhook) count(direction string, n int) {
	if h.Metrics != nil {
		h.Metrics.Bytes.WithLabelValues("webhook", direction).Add(float64(n))
	}
}
