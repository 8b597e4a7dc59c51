// Package core calls the subresources of the core's virt-api (subresources.kubevirt.io/v1 on
// the internal VMIs) through the cluster's API, as virtualization-api's own identity: the
// rest.Config it is made with (the Pod's ServiceAccount in a cluster), never the user's.
package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	wstransport "k8s.io/client-go/transport/websocket"
	"k8s.io/streaming/pkg/httpstream"
)

// The core's group and version, and the subprotocol of its streams (KubeVirt's).
const (
	Group            = "subresources.kubevirt.io"
	Version          = "v1"
	PlainSubprotocol = "plain.kubevirt.io"
)

// Client reaches the core's subresources.
type Client struct {
	cfg  *rest.Config
	base *url.URL
	http *http.Client
}

// New makes a client from cfg.
func New(cfg *rest.Config) (*Client, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of the core's API: %w", err)
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	base, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("API host %q: %w", cfg.Host, err)
	}
	return &Client{cfg: cfg, base: base, http: hc}, nil
}

// URL is the address of a VMI's subresource path (console, portforward/22/tcp, freeze). The
// namespace and name are the ones the cluster's API routed to us: DNS names, nothing to escape.
func (c *Client) URL(namespace, name, path string) string {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/apis/" + Group + "/" + Version + "/namespaces/" +
		namespace + "/virtualmachineinstances/" + name + "/" + path
	return u.String()
}

// Stream opens the VMI's stream at path. A refusal is the core's Status (apierrors.APIStatus,
// its code kept, its message prefixed with the VMI), e.g. 404 for a missing VMI or 409 for one
// that does not run.
func (c *Client) Stream(ctx context.Context, namespace, name, path string) (*websocket.Conn, error) {
	rt, holder, err := wstransport.RoundTripperFor(c.cfg)
	if err != nil {
		return nil, fmt.Errorf("WebSocket transport: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(namespace, name, path), nil)
	if err != nil {
		return nil, err
	}
	ws, err := wstransport.Negotiate(rt, holder, req, PlainSubprotocol)
	if err != nil {
		var up *httpstream.UpgradeFailureError
		var status apierrors.APIStatus
		if errors.As(err, &up) && errors.As(up.Cause, &status) {
			// The core's refusal, with its code, saying whose it is.
			st := status.Status()
			st.Message = fmt.Sprintf("the core's virt-api for VMI %s/%s: %s", namespace, name, st.Message)
			return nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, fmt.Errorf("open %s of VMI %s/%s: %w", path, namespace, name, err)
	}
	return ws, nil
}

// Call sends one request (PUT addvolume, freeze, ...) with body and returns the core's answer:
// status code, Content-Type and body.
func (c *Client) Call(ctx context.Context, method, namespace, name, path string, body io.Reader) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL(namespace, name, path), body)
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("%s %s of VMI %s/%s: %w", method, path, namespace, name, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, "", nil, fmt.Errorf("%s %s of VMI %s/%s: read the answer: %w", method, path, namespace, name, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), out, nil
}
