package transport

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
	"github.com/d8virt/kube-api-rewriter/pkg/rules"
)

// The renamed group and label prefix, spelled out once so that expectations read like the
// cluster's view.
const (
	IG = "internal.virtualization.deckhouse.io"
	IK = "kubevirt.internal.virtualization.deckhouse.io"
)

var testRewriter = rewrite.New(rules.Default())

var placeholder = regexp.MustCompile(`\bI[GK]\b`)

// c expands the words IG and IK in a cluster-view literal (APIGroup stays APIGroup).
func c(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		if m == "IG" {
			return IG
		}
		return IK
	})
}

// seen is what the fake upstream received.
type seen struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
}

// stub is a fake upstream RoundTripper: it records every request and answers with respond.
type stub struct {
	mu      sync.Mutex
	reqs    []seen
	respond func(*http.Request) *http.Response
}

func (s *stub) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, seen{req.Method, req.URL.Path, req.URL.RawQuery, req.Header.Clone(), body})
	s.mu.Unlock()
	if s.respond == nil {
		return response(req, http.StatusOK, "application/json", `{}`), nil
	}
	return s.respond(req), nil
}

func (s *stub) calls() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

// response builds an upstream answer with a known length, as the apiserver sends small objects.
func response(req *http.Request, code int, ct, body string) *http.Response {
	h := http.Header{}
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	return &http.Response{
		StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(&lastWithEOF{body}), ContentLength: int64(len(body)), Request: req,
	}
}

// unknownLength makes r a response without a Content-Length, as watches and large lists come.
func unknownLength(r *http.Response) *http.Response {
	r.ContentLength = -1
	return r
}

// lastWithEOF returns its last bytes together with io.EOF, as net/http does for a body of known
// length.
type lastWithEOF struct{ s string }

func (r *lastWithEOF) Read(p []byte) (int, error) {
	n := copy(p, r.s)
	r.s = r.s[n:]
	if len(r.s) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// newEngine returns the engine around up with fresh metrics.
func newEngine(up http.RoundTripper) (*RoundTripper, *metrics.Metrics) {
	m := metrics.New()
	return New(up, Options{Rewriter: testRewriter, Metrics: m, Listener: "api"}), m
}

// newRequest builds a client request the way client-go and the reverse proxy hand it over; a
// target that is only a path goes to a fake host.
func newRequest(t testing.TB, method, target, ct string, body []byte) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	u := target
	if strings.HasPrefix(u, "/") {
		u = "http://upstream" + u
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatalf("request %s %s: %v", method, target, err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	return req
}

func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return b
}

// jsonEqual compares documents semantically: the engine keeps key order, but expectations are
// easier to read when they need not.
func jsonEqual(t testing.TB, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("invalid JSON %q: %v", got, err)
		return false
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("invalid expectation %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// statusOf decodes a metav1 Status answer.
type status struct {
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Code    int    `json:"code"`
	Details struct {
		Group string `json:"group"`
		Kind  string `json:"kind"`
		Name  string `json:"name"`
	} `json:"details"`
}

func statusOf(t testing.TB, body []byte) status {
	t.Helper()
	var s status
	if err := json.Unmarshal(body, &s); err != nil || s.Kind != "Status" {
		t.Fatalf("not a Status: %q (%v)", body, err)
	}
	return s
}

func readBody(resp *http.Response) ([]byte, error) { return io.ReadAll(resp.Body) }

// sumCounter adds up every series of a counter vector.
func sumCounter(v *prometheus.CounterVec) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { v.Collect(ch); close(ch) }()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err == nil {
			sum += pb.GetCounter().GetValue()
		}
	}
	return sum
}

// counterValue reads one series (zero when it was never touched).
func counterValue(v *prometheus.CounterVec, labels ...string) float64 {
	return testutil.ToFloat64(v.WithLabelValues(labels...))
}
