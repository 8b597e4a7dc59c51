package transport

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// resourceLabel keeps the metric's cardinality bounded by resource, never by object name.
func resourceLabel(ri rewrite.RequestInfo) string {
	l := resourceName(ri)
	// Prometheus panics on a label value that is not UTF-8, and the path is the client's: one
	// request for /api/v1/%ff must not take the proxy (or an in-process user) down.
	if !utf8.ValidString(l) {
		return "invalid"
	}
	return l
}

func resourceName(ri rewrite.RequestInfo) string {
	switch ri.Kind {
	case rewrite.PathResource:
		r := ri.Resource
		if ri.Group != "" {
			r += "." + ri.Group
		}
		if ri.Subresource != "" {
			sub, _, _ := strings.Cut(ri.Subresource, "/")
			r += "/" + sub
		}
		return r
	case rewrite.PathOther:
		return "nonresource"
	}
	return "discovery"
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
