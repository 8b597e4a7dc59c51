package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/d8virt/virtualization-controller/pkg/importer/contract"
)

// HTTP reads a URL. A request that fails transiently (connection refused or reset, timeouts, 408,
// 429, 5xx) is retried with back-off; a body that breaks off is resumed where it broke, with a
// Range request (or by skipping what was read when the server ignores Range).
type HTTP struct {
	URL string
	// Token, when set, goes with every request as "Authorization: Bearer <Token>" (an exporter's).
	Token   string
	Client  *http.Client
	Backoff Backoff
	Sleep   Sleep
	Log     *slog.Logger
}

// Open sends the first request.
func (h *HTTP) Open(ctx context.Context) (Stream, error) {
	r := &httpReader{h: h, ctx: ctx, size: -1}
	if err := r.connect(); err != nil {
		return Stream{}, err
	}
	return Stream{ReadCloser: r, Size: r.size}, nil
}

type httpReader struct {
	h      *HTTP
	ctx    context.Context
	body   io.ReadCloser
	offset int64 // bytes handed to the caller
	size   int64 // -1: unknown
	broken int   // times the body broke off since the last byte arrived
	cause  error // why it last broke
}

// connect (re)opens the body at r.offset, retrying transient failures.
func (r *httpReader) connect() error {
	var last error
	for attempt := 1; attempt <= r.h.Backoff.Attempts; attempt++ {
		if attempt > 1 {
			d := r.h.Backoff.delay(attempt - 1)
			r.h.Log.Info("retrying the source", "url", r.h.URL, "attempt", attempt, "after", d, "offset", r.offset, "error", last)
			if err := r.h.Sleep(r.ctx, d); err != nil {
				return fmt.Errorf("%w (last: %w)", err, last)
			}
		}
		retry, err := r.request()
		if err == nil {
			return nil
		}
		if !retry {
			return err
		}
		last = err
	}
	return last
}

// request sends one GET; retry says whether a failure is transient.
func (r *httpReader) request() (retry bool, err error) {
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, r.h.URL, nil)
	if err != nil {
		return false, contract.Errorf(contract.ReasonInvalidArguments, "source URL %q: %w", r.h.URL, err)
	}
	if r.h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.h.Token)
	}
	if r.offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(r.offset, 10)+"-")
	}
	resp, err := r.h.Client.Do(req)
	if err != nil {
		if r.ctx.Err() != nil {
			return false, r.ctx.Err()
		}
		if tlsFailure(err) {
			return false, contract.Errorf(contract.ReasonSourceUnreachable, "cannot verify the TLS certificate of %s: %w (set the caBundle that signed it)", r.h.URL, err)
		}
		return true, contract.Errorf(contract.ReasonSourceUnreachable, "cannot reach %s: %w", r.h.URL, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if r.offset > 0 { // the server ignores Range: skip what was read
			if _, err := io.CopyN(io.Discard, resp.Body, r.offset); err != nil {
				resp.Body.Close()
				return true, contract.Errorf(contract.ReasonSourceFailed, "resuming %s: %w", r.h.URL, err)
			}
		}
		if r.size < 0 && resp.ContentLength >= 0 {
			r.size = resp.ContentLength
		}
		r.body = resp.Body
		return false, nil
	case resp.StatusCode == http.StatusPartialContent && r.offset > 0:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != r.offset {
			resp.Body.Close()
			return false, contract.Errorf(contract.ReasonSourceFailed, "resuming %s at %d: the server answered Content-Range %q", r.h.URL, r.offset, resp.Header.Get("Content-Range"))
		}
		r.body = resp.Body
		return false, nil
	}
	resp.Body.Close()
	status := fmt.Sprintf("%s answered %s", r.h.URL, resp.Status)
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusGone:
		return false, contract.Errorf(contract.ReasonSourceNotFound, "%s: check the URL", status)
	case http.StatusUnauthorized, http.StatusForbidden:
		return false, contract.Errorf(contract.ReasonSourceForbidden, "%s: the URL needs credentials or is not public", status)
	case http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true, contract.Errorf(contract.ReasonSourceFailed, "%s", status)
	}
	return resp.StatusCode >= 500, contract.Errorf(contract.ReasonSourceFailed, "%s", status)
}

func (r *httpReader) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			if r.broken >= r.h.Backoff.Attempts {
				return 0, contract.Errorf(contract.ReasonSourceFailed, "reading %s broke off %d times at byte %d: %w", r.h.URL, r.broken, r.offset, r.cause)
			}
			if err := r.h.Sleep(r.ctx, r.h.Backoff.delay(r.broken)); err != nil {
				return 0, err
			}
			if err := r.connect(); err != nil {
				return 0, err
			}
		}
		n, err := r.body.Read(p)
		r.offset += int64(n)
		if n > 0 {
			r.broken = 0
		}
		if err == io.EOF && r.size >= 0 && r.offset < r.size {
			err = io.ErrUnexpectedEOF
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		if r.ctx.Err() != nil {
			return n, r.ctx.Err()
		}
		// Resume on the next Read; report the bytes that did arrive now.
		r.h.Log.Info("the source's stream broke; resuming", "url", r.h.URL, "offset", r.offset, "error", err)
		r.body.Close()
		r.body, r.broken, r.cause = nil, r.broken+1, err
		if n > 0 {
			return n, nil
		}
	}
}

func (r *httpReader) Close() error {
	if r.body == nil {
		return nil
	}
	return r.body.Close()
}

// rangeStart reads "bytes START-END/TOTAL".
func rangeStart(v string) (int64, bool) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil
}

func tlsFailure(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host)
}
