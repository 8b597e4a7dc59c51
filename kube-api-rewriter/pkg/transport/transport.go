// Package transport is the rewriter's engine: an http.RoundTripper that takes requests in the
// component's view (kubevirt.io), sends them renamed to the cluster, and hands back responses
// restored to the component's view. The sidecar proxy and in-process users (Wrap on a rest.Config)
// share it.
//
// What is rewritten:
//   - discovery (/api, /apis, /apis/G, /apis/G/V) and every API resource request, except the
//     passthrough set below: paths, labelSelector and fieldSelector, request bodies and patches,
//     and JSON responses (objects, lists streamed item by item, watch streams event by event,
//     Status errors and Tables);
//   - only JSON: for a request it rewrites, protobuf is taken out of Accept, and a protobuf body
//     of a built-in kind is converted to JSON first; any other body type is refused with 415.
//
// What passes through untouched, protobuf and all: non-API paths, streaming subresources (exec,
// attach, portforward, log, proxy) and upgrade requests, the aggregated subresources API, and
// resources that never carry renamed names (leases, token and access reviews).
package transport

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/d8virt/kube-api-rewriter/pkg/metrics"
	"github.com/d8virt/kube-api-rewriter/pkg/rewrite"
)

// Options configure the engine.
type Options struct {
	Rewriter *rewrite.Rewriter
	// Metrics may be nil.
	Metrics *metrics.Metrics
	// Listener labels the metrics ("api", "inprocess").
	Listener string
	// Log receives errors, and at debug level a structural diff of each rewritten request body.
	Log *slog.Logger
}

// RoundTripper rewrites around next.
type RoundTripper struct {
	next http.RoundTripper
	o    Options
	// familySuffixes are ".G" for every original group G: an unlisted group under one of them
	// (subresources.kubevirt.io, cdi.kubevirt.io) belongs to someone else and is never touched.
	familySuffixes []string
}

var _ http.RoundTripper = (*RoundTripper)(nil)

// New wraps next, which talks to the cluster with its own credentials.
func New(next http.RoundTripper, o Options) *RoundTripper {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Listener == "" {
		o.Listener = "inprocess"
	}
	t := &RoundTripper{next: next, o: o}
	for _, g := range o.Rewriter.Rules().OriginalGroups() {
		t.familySuffixes = append(t.familySuffixes, "."+g)
	}
	return t
}

// unlistedFamilyGroup reports whether g sits under an original group without being renamed
// itself, like KubeVirt's aggregated subresources.kubevirt.io API, which the component's own
// peers serve in the original view: restoring it would prefix its kubevirt.io names as
// preserved originals.
func (t *RoundTripper) unlistedFamilyGroup(g string) bool {
	if _, renamed := t.o.Rewriter.Rules().Group(rewrite.Rename, g); renamed {
		return false
	}
	for _, s := range t.familySuffixes {
		if strings.HasSuffix(g, s) {
			return true
		}
	}
	return false
}

// passthroughGroups never hold renamed names in their payloads.
var passthroughGroups = map[string]bool{
	"coordination.k8s.io":   true,
	"authentication.k8s.io": true,
}

// streamingSubresources are byte streams or upgrades, never API objects.
var streamingSubresources = map[string]bool{
	"exec": true, "attach": true, "portforward": true, "log": true, "proxy": true,
}

// answersObjects reports whether an upgrade request to a rewritten path would be answered with
// API objects (a watch over WebSocket, or an object or list the apiserver answers without
// upgrading) rather than be a stream of its own, such as the console of an aggregated API.
func answersObjects(ri rewrite.RequestInfo) bool {
	if ri.Verb == "watch" || ri.Kind != rewrite.PathResource {
		return true
	}
	sub, _, _ := strings.Cut(ri.Subresource, "/")
	return sub == "" || sub == "status" || sub == "scale"
}

// rewrites reports whether the rewriter renames requests to the path of ri and restores their
// answers. Upgrades to such paths (a watch over WebSocket) are refused: their frames would reach
// the component unrestored.
func (t *RoundTripper) rewrites(ri rewrite.RequestInfo) bool {
	if ri.Kind != rewrite.PathOther && t.o.Rewriter.Rules().IsPassthroughGroup(ri.Group) {
		return false // the rules say: never touched
	}
	switch ri.Kind {
	case rewrite.PathLegacyRoot, rewrite.PathRoot, rewrite.PathGroup, rewrite.PathGroupVersion:
		return true
	case rewrite.PathResource:
		sub, _, _ := strings.Cut(ri.Subresource, "/")
		if streamingSubresources[sub] || passthroughGroups[ri.Group] {
			return false
		}
		// The core's aggregated API serves commands and streams, and is not renamed.
		return !t.unlistedFamilyGroup(ri.Group)
	}
	return false
}

// RoundTrip implements http.RoundTripper.
func (t *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	ri := rewrite.ParseRequest(req.Method, req.URL)
	verb := ri.Verb
	var (
		resp *http.Response
		err  error
	)
	if isOpenAPI(req) {
		resp, err = t.openAPIRoundTrip(req)
	} else if t.rewrites(ri) && req.Header.Get("Upgrade") != "" && answersObjects(ri) {
		resp = statusResponse(req, http.StatusBadRequest, "BadRequest", fmt.Sprintf(
			"kube-api-rewriter: %s of %s over %s is not rewritten, so it is refused; %s over plain HTTP instead (without an Upgrade header)",
			verb, req.URL.Path, req.Header.Get("Upgrade"), verb))
	} else if t.rewrites(ri) {
		resp, err = t.rewriteRoundTrip(req, ri, verb == "watch")
	} else {
		resp, err = t.next.RoundTrip(req)
	}
	code := 0
	if err == nil && resp != nil {
		code = resp.StatusCode
	}
	t.observe(t.resourceLabel(ri, code), verb, resp, err, start)
	return resp, err
}

func (t *RoundTripper) rewriteRoundTrip(req *http.Request, ri rewrite.RequestInfo, watch bool) (*http.Response, error) {
	rw := t.o.Rewriter
	out := req.Clone(req.Context())
	if p, ok := rw.Path(rewrite.Rename, req.URL.Path); ok {
		out.URL.Path, out.URL.RawPath = p, ""
	}
	if req.URL.RawQuery != "" {
		q, err := rw.Query(rewrite.Rename, ri, req.URL.RawQuery)
		if err != nil {
			t.rewriteError("query", rewrite.Rename, err)
			return statusResponse(req, http.StatusBadRequest, "BadRequest", fmt.Sprintf("kube-api-rewriter: query: %v", err)), nil
		}
		out.URL.RawQuery = q
	}
	if req.Body != nil && req.Body != http.NoBody {
		if resp := t.renameBody(req, out, ri); resp != nil {
			return resp, nil
		}
	}
	out.Header.Set("Accept", jsonAccept(req.Header.Get("Accept")))
	// A client that takes gzip gets the apiserver's gzip as it is where nothing is restored (an
	// answer that is not JSON); the engine inflates it itself where it restores. Without an
	// Accept-Encoding of our own, the transport asks for gzip and inflates it for us.
	out.Header.Del("Accept-Encoding")
	if acceptsGzip(req.Header.Values("Accept-Encoding")) {
		out.Header.Set("Accept-Encoding", "gzip")
	}

	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if !isJSON(resp.Header.Get("Content-Type")) || resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, nil
	}
	// HEAD, 204 and 304 carry no document: there is nothing to restore, and an empty body is not
	// a rewrite error.
	if req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.ContentLength == 0 {
		return resp, nil
	}
	if !resp.Uncompressed && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		resp.Body, resp.ContentLength = inflate(resp.Body), -1
		resp.Header.Del("Content-Encoding")
	}
	target := rw.TargetFor(rewrite.Restore, rewrite.ParsePath(out.URL.Path))
	if watch && resp.StatusCode == http.StatusOK {
		resp.Body, resp.ContentLength = t.restoreWatch(resp.Body, target, t.resourceLabel(ri, resp.StatusCode)), -1
	} else {
		resp.Body, resp.ContentLength = t.restoreDocument(resp.Body, target)
	}
	resp.Header.Del("Content-Length")
	if resp.ContentLength >= 0 {
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	resp.Uncompressed = true
	return resp, nil
}

// renameBody rewrites the request body into out. It returns a response to send instead when the
// body cannot be rewritten.
func (t *RoundTripper) renameBody(req, out *http.Request, ri rewrite.RequestInfo) *http.Response {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return statusResponse(req, http.StatusBadRequest, "BadRequest", fmt.Sprintf("kube-api-rewriter: read request body: %v", err))
	}
	ct := req.Header.Get("Content-Type")
	target := t.o.Rewriter.TargetFor(rewrite.Rename, ri)
	var renamed []byte
	payload := "object"
	switch {
	case len(body) == 0:
		renamed = body
	case req.Method == http.MethodPatch && mediaType(ct) == rewrite.ContentTypeJSONPatch && t.o.Rewriter.JSONPatchNeedsObject(body):
		// An owner reference's kind or apiVersion alone: its sibling is in the stored object.
		payload = "patch"
		var current []byte
		if current, err = t.current(out); err == nil {
			renamed, err = t.o.Rewriter.JSONPatchWithObject(body, current, target)
		}
	case req.Method == http.MethodPatch:
		payload = "patch"
		renamed, err = t.o.Rewriter.Patch(rewrite.Rename, ct, body, target)
	case isJSON(ct) || ct == "":
		renamed, err = t.o.Rewriter.Object(rewrite.Rename, body, target)
	case mediaType(ct) == yamlContentType:
		// The apiserver accepts YAML objects (kubectl create --raw sends them); JSON is what the
		// engine reads, and the apiserver accepts it as well.
		if body, err = yaml.YAMLToJSON(body); err == nil {
			renamed, err = t.o.Rewriter.Object(rewrite.Rename, body, target)
			ct = "application/json"
		}
	case mediaType(ct) == protobufContentType:
		if body, err = protobufToJSON(body); err == nil {
			renamed, err = t.o.Rewriter.Object(rewrite.Rename, body, target)
			ct = "application/json"
		}
	default:
		return statusResponse(req, http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			fmt.Sprintf("kube-api-rewriter: %s bodies of %s cannot be rewritten; send application/json", ct, ri.Resource))
	}
	if err != nil {
		t.rewriteError(payload, rewrite.Rename, err)
		code, reason := http.StatusBadRequest, "BadRequest"
		if errors.Is(err, rewrite.ErrUnsupportedContentType) {
			code, reason = http.StatusUnsupportedMediaType, "UnsupportedMediaType"
		}
		return statusResponse(req, code, reason, fmt.Sprintf("kube-api-rewriter: %s body: %v", payload, err))
	}
	t.rewritten(payload, rewrite.Rename)
	if t.o.Log.Enabled(req.Context(), slog.LevelDebug) {
		if changes, derr := rewrite.Diff(body, renamed, 50); derr == nil && len(changes) > 0 {
			t.o.Log.Debug("renamed request body", "method", req.Method, "path", req.URL.Path, "diff", rewrite.FormatDiff(changes))
		}
	}
	t.addBytes("in", len(body))
	out.Body = io.NopCloser(bytes.NewReader(renamed))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(renamed)), nil }
	out.Header.Set("Content-Type", ct)
	out.ContentLength = int64(len(renamed))
	out.Header.Set("Content-Length", strconv.Itoa(len(renamed)))
	return nil
}

// current reads the object a (renamed) request is about, as the cluster holds it. An object
// that cannot be read is nil: the request goes on and the apiserver answers it.
func (t *RoundTripper) current(out *http.Request) ([]byte, error) {
	get, err := http.NewRequestWithContext(out.Context(), http.MethodGet, out.URL.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("read the patched object: %w", err)
	}
	get.URL.RawQuery = ""
	for k, v := range out.Header {
		switch k {
		case "Content-Type", "Content-Length", "Accept", "Accept-Encoding":
		default:
			get.Header[k] = v
		}
	}
	get.Header.Set("Accept", "application/json")
	resp, err := t.next.RoundTrip(get)
	if err != nil {
		return nil, fmt.Errorf("read the patched object: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !isJSON(resp.Header.Get("Content-Type")) {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4*inMemoryLimit))
	if err != nil {
		return nil, fmt.Errorf("read the patched object: %w", err)
	}
	return b, nil
}

// restoreDocument restores a response document and returns its body and restored length, or -1.
// Answers up to inMemoryLimit (nearly all of them) are read whole and restored in one walk here,
// before the response is handed on, so that they go out with their length: the reverse proxy
// then writes them as they are instead of in chunks flushed one by one, which cost a third of the
// rewriter's extra time on a LIST of 200 pods. Larger ones are restored as they arrive, list items
// one at a time, so that memory stays bounded whatever their size; their length is unknown.
func (t *RoundTripper) restoreDocument(body io.ReadCloser, target rewrite.Target) (io.ReadCloser, int64) {
	b := &documentBody{t: t, upstream: body, target: target}
	b.load()
	if b.stream != nil || b.err != io.EOF {
		return b, -1
	}
	return b, int64(len(b.out))
}

// inMemoryLimit is the largest response restored in one piece. The in-memory walk costs what the
// streamed one costs, but needs no goroutine, pipe or read-ahead.
const inMemoryLimit = 1 << 20

// bufPool holds the buffers of in-memory restores: reading a response into a fresh, growing slice
// and allocating its output cost as much as rewriting it.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, inMemoryLimit+64<<10); return &b }}

// documentBody is the restored body of a document. There is no goroutine between the upstream
// and the client for a document restored in memory: Read copies out what restoreDocument made.
type documentBody struct {
	t        *RoundTripper
	upstream io.ReadCloser
	target   rewrite.Target

	inp, outp *[]byte // pooled, until the document has been handed out
	out       []byte  // the restored document: out[opos:] is still to be read
	opos      int
	err       error         // after out: io.EOF, or why the document could not be restored
	stream    *restoredBody // a large document, restored by a goroutine through a pipe
	closed    atomic.Bool
}

var _ io.ReadCloser = (*documentBody)(nil)

func (b *documentBody) Read(p []byte) (int, error) {
	if b.stream != nil {
		return b.stream.Read(p)
	}
	if b.opos < len(b.out) {
		n := copy(p, b.out[b.opos:])
		b.opos += n
		return n, nil
	}
	b.release()
	return 0, b.err
}

// load reads the document and restores it in memory, or hands over to restoreLarge when it is
// larger than inMemoryLimit.
func (b *documentBody) load() {
	t := b.t
	b.inp, b.outp = bufPool.Get().(*[]byte), bufPool.Get().(*[]byte)
	head := (*b.inp)[:0]
	for len(head) <= inMemoryLimit {
		if cap(head)-len(head) < 32<<10 {
			head = append(head, make([]byte, 64<<10)...)[:len(head)]
		}
		n, err := b.upstream.Read(head[len(head):cap(head)])
		head = head[:len(head)+n]
		if errors.Is(err, io.EOF) {
			b.restore(head)
			return
		}
		if err != nil {
			b.fail(err)
			return
		}
	}
	*b.inp = head[:0]
	b.stream = t.restoreLarge(head, b.upstream, b.target)
}

// restore restores a document read whole.
func (b *documentBody) restore(doc []byte) {
	t := b.t
	b.err = io.EOF
	if len(bytes.TrimSpace(doc)) == 0 {
		if len(doc) > 0 {
			b.fail(fmt.Errorf("restore response: %w", io.ErrUnexpectedEOF))
			return
		}
		t.rewritten("object", rewrite.Restore) // an empty body (chunked, no document)
		return
	}
	out, err := t.o.Rewriter.AppendObject(rewrite.Restore, (*b.outp)[:0], doc, b.target)
	// Keep a buffer that had to grow, but never a nil one from an error.
	if cap(out) > cap(*b.outp) && cap(out) <= 4*inMemoryLimit {
		*b.outp = out[:0]
	}
	if err != nil {
		b.fail(err)
		return
	}
	t.rewritten("object", rewrite.Restore)
	t.addBytes("out", len(out))
	b.out = out
}

// fail ends the body with err instead of a document; a document cut short is not a clean end.
func (b *documentBody) fail(err error) {
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("restore response: %w", io.ErrUnexpectedEOF)
	}
	if !b.closed.Load() {
		b.t.rewriteError("object", rewrite.Restore, err)
	}
	b.err = err
}

// release gives the buffers back once the document has been handed out.
func (b *documentBody) release() {
	if b.inp != nil {
		bufPool.Put(b.inp)
		bufPool.Put(b.outp)
		b.inp, b.outp, b.out = nil, nil, nil
	}
}

func (b *documentBody) Close() error {
	b.closed.Store(true)
	if b.stream != nil {
		return b.stream.Close()
	}
	return b.upstream.Close()
}

// restoreLarge restores a document larger than inMemoryLimit as it arrives, list items one at a
// time; head is what has been read of it.
func (t *RoundTripper) restoreLarge(head []byte, body io.ReadCloser, target rewrite.Target) *restoredBody {
	pr, pw := io.Pipe()
	rb := &restoredBody{PipeReader: pr, upstream: body}
	go func() {
		defer body.Close()
		cw := &countingWriter{w: pw}
		// ObjectStream writes item by item; batching them saves a pipe hand-over, and with the
		// reverse proxy's immediate flushing a chunk and a syscall, per list item.
		bw := bufio.NewWriterSize(cw, 64<<10)
		err := t.o.Rewriter.ObjectStream(rewrite.Restore, bw, io.MultiReader(bytes.NewReader(head), body), target)
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		t.addBytes("out", cw.n)
		if errors.Is(err, io.EOF) {
			// A document cut short: a bare EOF would end the client's read as if the body were
			// complete.
			err = fmt.Errorf("restore response: %w", io.ErrUnexpectedEOF)
		}
		switch {
		case rb.closed.Load() || errors.Is(err, io.ErrClosedPipe):
			// The client went away first: neither a rewrite nor a rewrite error.
		case err != nil:
			t.rewriteError("object", rewrite.Restore, err)
		default:
			t.rewritten("object", rewrite.Restore)
		}
		pw.CloseWithError(err)
	}()
	return rb
}

// restoredBody is the body of a large document restored by a goroutine. Closing it also closes
// the upstream body, so that a client that goes away does not leave the goroutine and the upstream
// connection behind.
type restoredBody struct {
	*io.PipeReader
	upstream io.Closer
	closed   atomic.Bool
}

var _ io.ReadCloser = (*restoredBody)(nil)

func (b *restoredBody) Close() error {
	b.closed.Store(true)
	b.PipeReader.Close()
	return b.upstream.Close()
}

const yamlContentType = "application/yaml"

// acceptsGzip reports whether Accept-Encoding values take gzip (with a q above 0).
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// inflate returns the inflated body of a gzip answer.
func inflate(body io.ReadCloser) io.ReadCloser {
	return &gunzipBody{upstream: body}
}

// gunzipBody inflates as it is read; the gzip header is read with the first Read.
type gunzipBody struct {
	upstream io.ReadCloser
	zr       *gzip.Reader
	err      error
}

var _ io.ReadCloser = (*gunzipBody)(nil)

func (b *gunzipBody) Read(p []byte) (int, error) {
	if b.zr == nil && b.err == nil {
		if b.zr, b.err = gzip.NewReader(b.upstream); b.err != nil {
			b.err = fmt.Errorf("inflate gzip answer: %w", b.err)
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.zr.Read(p)
}

func (b *gunzipBody) Close() error { return b.upstream.Close() }

// jsonAccept keeps the JSON media types of an Accept header (Table and aggregated discovery
// included) and drops protobuf, which the rewriter cannot read.
func jsonAccept(accept string) string {
	var keep []string
	for _, part := range strings.Split(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt == "application/json" || mt == "*/*" || mt == "application/*" {
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	if len(keep) == 0 {
		return "application/json"
	}
	return strings.Join(keep, ", ")
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

func isJSON(ct string) bool {
	mt := mediaType(ct)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// StatusJSON is a metav1 Status failure, the error format every Kubernetes client understands.
func StatusJSON(code int, reason, msg string) []byte {
	b, _ := json.Marshal(map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
	return b
}

// statusResponse answers a request with a Status, as the apiserver would.
func statusResponse(req *http.Request, code int, reason, msg string) *http.Response {
	b := StatusJSON(code, reason, msg)
	return &http.Response{
		StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)),
		Request:       req,
	}
}

type countingWriter struct {
	w io.Writer
	n int
}

var _ io.Writer = (*countingWriter)(nil)

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

// isOpenAPI reports the requests for OpenAPI documents that the engine rewrites: GETs of
// /openapi/v2 and of /openapi/v3 and below (the apiserver serves nothing else under /openapi/).
func isOpenAPI(req *http.Request) bool {
	return req.Method == http.MethodGet && (req.URL.Path == "/openapi/v2" || strings.HasPrefix(req.URL.Path, "/openapi/v3"))
}

// openAPIRoundTrip serves the OpenAPI v3 index and group-version documents in the component's
// names, so that kubectl explain works through the rewriter. Other documents pass through.
func (t *RoundTripper) openAPIRoundTrip(req *http.Request) (*http.Response, error) {
	rw := t.o.Rewriter
	out := req.Clone(req.Context())
	restore := rw.OpenAPIDocument
	switch p, renamed := rw.OpenAPIPath(req.URL.Path); {
	case req.URL.Path == "/openapi/v2":
		restore = rw.OpenAPIV2
		if wantsProtobuf(req.Header.Get("Accept")) {
			restore = func(b []byte) ([]byte, error) { return openAPIV2Protobuf(rw.OpenAPIV2(b)) }
		}
	case req.URL.Path == "/openapi/v3":
		restore = rw.OpenAPIRoot
	case renamed:
		out.URL.Path, out.URL.RawPath = p, ""
	default:
		return t.next.RoundTrip(req)
	}
	out.Header.Set("Accept", "application/json")
	out.Header.Del("Accept-Encoding")
	resp, err := t.next.RoundTrip(out)
	// The apiserver labels the JSON index text/plain, so the content type is not checked; a body
	// that does not decode is answered as an error below.
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read OpenAPI document: %w", err)
	}
	restored, err := restore(body)
	if err != nil {
		t.rewriteError("openapi", rewrite.Restore, err)
		return statusResponse(req, http.StatusBadGateway, "InternalError", fmt.Sprintf("kube-api-rewriter: %v", err)), nil
	}
	t.rewritten("openapi", rewrite.Restore)
	if req.URL.Path == "/openapi/v2" && wantsProtobuf(req.Header.Get("Accept")) {
		resp.Header.Set("Content-Type", openAPIV2ProtobufType)
	}
	resp.Body = io.NopCloser(bytes.NewReader(restored))
	resp.ContentLength = int64(len(restored))
	resp.Header.Set("Content-Length", strconv.Itoa(len(restored)))
	resp.Header.Del("Etag")
	resp.Uncompressed = true
	return resp, nil
}
