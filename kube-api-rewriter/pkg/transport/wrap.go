package transport

import (
	"net/http"

	"k8s.io/client-go/rest"
)

// Wrap returns a copy of cfg whose clients rewrite in-process: the program talks kubevirt.io, the
// cluster sees the renamed kinds, and no sidecar is needed.
func Wrap(cfg *rest.Config, o Options) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return New(rt, o) })
	// Protobuf cannot be rewritten; JSON is what the engine asks the cluster for anyway.
	out.ContentType = "application/json"
	out.AcceptContentTypes = "application/json"
	return out
}
