// Package console opens a VMI's serial console, VNC or port-forward stream the way `virtctl
// console`, `virtctl vnc` and `virtctl port-forward` do: a WebSocket with the plain.kubevirt.io
// subprotocol on the subresources.kubevirt.io API, authenticated with the caller's kubeconfig.
package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// The kinds whose subresources stream.
const (
	VMIs = "virtualmachineinstances"
	VMs  = "virtualmachines"
)

// URL is the address of a VMI's stream on the cluster's API: ws or wss after the config's scheme.
func URL(cfg *rest.Config, namespace, name, stream string) (string, error) {
	return ResourceURL(cfg, VMIs, namespace, name, stream)
}

// ResourceURL is the address of the stream sub of a VMI or VM (resource VMIs or VMs).
func ResourceURL(cfg *rest.Config, resource, namespace, name, sub string) (string, error) {
	return StreamURL(cfg, "/apis/subresources.kubevirt.io/v1/namespaces/"+namespace+"/"+resource+"/"+name+"/"+sub)
}

// StreamURL is the address of a stream at path on the cluster's API (another group's
// subresource, e.g. virtualization-api's): ws or wss after the config's scheme.
func StreamURL(cfg *rest.Config, path string) (string, error) {
	host := cfg.Host
	if !strings.Contains(host, "://") {
		// client-go takes a bare host:port as https.
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("kubeconfig host %q: %w", cfg.Host, err)
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	default:
		return "", fmt.Errorf("kubeconfig host %q: unsupported scheme", cfg.Host)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	return u.String(), nil
}

// Conn is an open stream: reads return what the guest sends, writes go to the guest.
type Conn struct {
	ws     *websocket.Conn
	rmu    sync.Mutex
	reader io.Reader
	wmu    sync.Mutex
}

// Open connects to the VMI's stream ("console" or "vnc"). A refusal is a *RefusedError with the
// server's message, e.g. "VMI is not running".
func Open(ctx context.Context, cfg *rest.Config, namespace, name, stream string) (*Conn, error) {
	return OpenResource(ctx, cfg, VMIs, namespace, name, stream)
}

// PortForward connects to a port of a VMI's guest (resource VMIs) or of a VM's VMI (VMs), as
// `virtctl port-forward` does for each connection; protocol is "tcp" or "udp". Each message
// written is one datagram under udp.
func PortForward(ctx context.Context, cfg *rest.Config, resource, namespace, name string, port int, protocol string) (*Conn, error) {
	return OpenResource(ctx, cfg, resource, namespace, name, wsrelay.PortForward{Port: port, Protocol: protocol}.Path())
}

// RefusedError is the server's answer to a stream it did not open.
type RefusedError struct {
	// Code is the HTTP status, Message the body (a Status as JSON, usually).
	Code    int
	Message string
	what    string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("open %s: %d %s: %s", e.what, e.Code, http.StatusText(e.Code), e.Message)
}

// OpenResource connects to the stream sub of a VMI or VM (resource VMIs or VMs).
func OpenResource(ctx context.Context, cfg *rest.Config, resource, namespace, name, sub string) (*Conn, error) {
	target, err := ResourceURL(cfg, resource, namespace, name, sub)
	if err != nil {
		return nil, err
	}
	return Dial(ctx, cfg, target, fmt.Sprintf("%s of %s/%s", sub, namespace, name))
}

// Dial opens the stream at target (StreamURL) with the config's credentials and the plain
// subprotocol; what names it in errors.
func Dial(ctx context.Context, cfg *rest.Config, target, what string) (*Conn, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig TLS: %w", err)
	}
	header := http.Header{}
	if cfg.BearerToken != "" {
		header.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	d := websocket.Dialer{
		TLSClientConfig:  tlsConfig,
		Subprotocols:     []string{wsrelay.PlainSubprotocol},
		HandshakeTimeout: 30 * time.Second,
		ReadBufferSize:   32 << 10,
		WriteBufferSize:  32 << 10,
	}
	ws, resp, err := d.DialContext(ctx, target, header)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return nil, &RefusedError{Code: resp.StatusCode, Message: strings.TrimSpace(string(body)), what: what}
		}
		return nil, fmt.Errorf("open %s: %w", what, err)
	}
	return &Conn{ws: ws}, nil
}

// Read reads what the guest sent, across message boundaries.
func (c *Conn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.reader == nil {
			_, r, err := c.ws.NextReader()
			if err != nil {
				if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					return 0, io.EOF
				}
				return 0, err
			}
			c.reader = r
		}
		n, err := c.reader.Read(p)
		if err == io.EOF {
			c.reader = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

// Write sends p to the guest as one binary message.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close ends the stream.
func (c *Conn) Close() error {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	return c.ws.Close()
}
