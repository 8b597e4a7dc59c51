package transport

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// resourceLabel keeps the metric's cardinality bounded by resource, never by object name, and
// never by made-up paths: a resource (and subresource) is named when the rules or the engine know
// it, or when the apiserver answered it with success, which only a resource it serves gets.
// Anything else is "other". code is the HTTP code of the answer, 0 when there was none.
func (t *RoundTripper) resourceLabel(ri rewrite.RequestInfo, code int) string {
	switch ri.Kind {
	case rewrite.PathResource:
	case rewrite.PathOther:
		return "nonresource"
	default:
		return "discovery"
	}
	served := code >= 200 && code < 400
	if !served && !t.o.Rewriter.KnownResource(ri.Group, ri.Resource) {
		return "other"
	}
	r := ri.Resource
	if ri.Group != "" {
		r += "." + ri.Group
	}
	if ri.Subresource != "" {
		sub, _, _ := strings.Cut(ri.Subresource, "/")
		if !served && !commonSubresources[sub] {
			sub = "other"
		}
		r += "/" + sub
	}
	// Prometheus panics on a label value that is not UTF-8, and the path is the client's: one
	// request for /api/v1/%ff must not take the proxy (or an in-process user) down.
	if !utf8.ValidString(r) {
		return "other"
	}
	return r
}

// commonSubresources are the subresources every apiserver has, named even when they fail.
var commonSubresources = map[string]bool{
	"status": true, "scale": true, "exec": true, "attach": true, "portforward": true, "log": true,
	"proxy": true, "eviction": true, "binding": true, "ephemeralcontainers": true, "resize": true,
	"token": true, "approval": true, "finalize": true,
}

func (t *RoundTripper) observe(resource, verb string, resp *http.Response, err error, start time.Time) {
	m := t.o.Metrics
	if m == nil {
		return
	}
	code := "error"
	if err == nil && resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	m.Requests.WithLabelValues(t.o.Listener, resource, verb, code).Inc()
	m.Duration.WithLabelValues(t.o.Listener, verb).Observe(time.Since(start).Seconds())
}

func (t *RoundTripper) rewritten(payload string, d rewrite.Direction) {
	if t.o.Metrics != nil {
		t.o.Metrics.Rewrites.WithLabelValues(payload, d.String()).Inc()
	}
}

func (t *RoundTripper) rewriteError(payload string, d rewrite.Direction, err error) {
	if t.o.Metrics != nil {
		t.o.Metrics.RewriteErrors.WithLabelValues(payload, d.String()).Inc()
	}
	t.o.Log.Warn("rewrite failed", "payload", payload, "direction", d.String(), "err", err)
}

func (t *RoundTripper) addBytes(direction string, n int) {
	if t.o.Metrics != nil && n > 0 {
		t.o.Metrics.Bytes.WithLabelValues(t.o.Listener, direction).Add(float64(n))
	}
}
