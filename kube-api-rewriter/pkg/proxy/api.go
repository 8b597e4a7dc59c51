// Package proxy holds the sidecar's HTTP handlers: the api listener, a reverse proxy to the real
// apiserver around the rewriting transport, and the webhook listener, which the apiserver calls
// with AdmissionReviews for renamed kinds.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"

	"k8s.io/client-go/rest"

	"github.com/d8virt/kube-api-rewriter/pkg/transport"
)

// NewAPI returns the api listener's handler: everything is forwarded to upstream through rt, the
// rewriting transport, which also carries the upstream credentials. Upgrades (exec, port-forward,
// console) pass through, and responses of unknown length, such as watches, are flushed as they
// arrive (the reverse proxy does that for every response without a Content-Length). Responses
// of known length, whole documents, are not flushed write by write: a flush per 32 KB costs a
// write and a wake-up of the client each.
func NewAPI(upstream *url.URL, rt http.RoundTripper, log *slog.Logger) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Host = upstream.Host
			// The component is not the one to prove identity: the upstream credentials are.
			pr.Out.Header.Del("Authorization")
		},
		Transport: rt,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			log.Warn("upstream request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			WriteStatus(w, http.StatusBadGateway, "ServiceUnavailable", fmt.Sprintf("kube-api-rewriter: upstream: %v", err))
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// WriteStatus answers with a metav1 Status.
func WriteStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(transport.StatusJSON(code, reason, msg))
}

// Upstream returns the address of the apiserver of cfg and a transport that carries cfg's
// credentials to it.
func Upstream(cfg *rest.Config) (*url.URL, http.RoundTripper, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("upstream apiserver address %q: %w", cfg.Host, err)
	}
	if u.Host == "" {
		return nil, nil, fmt.Errorf("upstream apiserver address %q: no host", cfg.Host)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("upstream transport: %w", err)
	}
	return u, rt, nil
}

// NewAPIForConfig is NewAPI for the apiserver and credentials of upstream, with the rewriting
// engine of o in between: everything a sidecar's api listener needs.
func NewAPIForConfig(upstream *rest.Config, o transport.Options) (http.Handler, error) {
	u, rt, err := Upstream(upstream)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return NewAPI(u, transport.New(rt, o), o.Log), nil
}
