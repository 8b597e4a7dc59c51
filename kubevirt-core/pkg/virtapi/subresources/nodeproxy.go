package subresources

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/virtapicontract"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// HandlerLabelValue is the kubevirt.io label of virt-handler Pods, by which virt-api finds the
// handler of a VMI's node, as KubeVirt does.
const HandlerLabelValue = "virt-handler"

// NodeProxy reaches the virt-handler of a node over mutual TLS.
type NodeProxy struct {
	Client client.Reader
	// Port is the handler's API port.
	Port int
	// TLS carries virt-api's client certificate and the CA of the handlers' serving certificates.
	TLS *tls.Config
}

// endpoint is the base URL of the handler Pod on the node.
func (p *NodeProxy) endpoint(ctx context.Context, node string) (string, *apierrors.StatusError) {
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.MatchingLabels{"kubevirt.io": HandlerLabelValue}); err != nil {
		return "", apierrors.NewInternalError(fmt.Errorf("find virt-handler of node %s: %w", node, err))
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != node || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		return "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.Port)), nil
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("virt-handler on node %q is not reachable", node))
}

func (p *NodeProxy) tlsConfig() *tls.Config {
	c := p.TLS.Clone()
	c.ServerName = virtapicontract.HandlerServerName
	return c
}

// Command relays a PUT to the handler and answers with the handler's answer.
func (p *NodeProxy) Command(w http.ResponseWriter, r *http.Request, node, path string) {
	base, serr := p.endpoint(r.Context(), node)
	if serr != nil {
		apistatus.Write(w, serr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+path, nil)
	if err != nil {
		apistatus.Write(w, apierrors.NewInternalError(err))
		return
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.tlsConfig()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("virt-handler on node %q: %v", node, err)))
		return
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

var clientUpgrader = websocket.Upgrader{
	Subprotocols:    []string{wsrelay.PlainSubprotocol},
	ReadBufferSize:  32 << 10,
	WriteBufferSize: 32 << 10,
	// The aggregator authenticated the caller and virt-api authorized it; a browser's Origin
	// says nothing more.
	CheckOrigin: func(*http.Request) bool { return true },
}

// Stream opens the stream on the handler first, so that a guest without a console is a plain
// error answer, then upgrades the client and relays until either side ends.
func (p *NodeProxy) Stream(w http.ResponseWriter, r *http.Request, node, path string) {
	base, serr := p.endpoint(r.Context(), node)
	if serr != nil {
		apistatus.Write(w, serr)
		return
	}
	u, err := url.Parse(base + path)
	if err != nil {
		apistatus.Write(w, apierrors.NewInternalError(err))
		return
	}
	u.Scheme = "wss"
	d := websocket.Dialer{TLSClientConfig: p.tlsConfig(), Subprotocols: []string{wsrelay.PlainSubprotocol}, HandshakeTimeout: 15 * time.Second}
	upstream, resp, err := d.DialContext(r.Context(), u.String(), nil)
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			// The handler answered with a Status; pass it on as it is.
			defer resp.Body.Close()
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("virt-handler on node %q: %v", node, err)))
		return
	}
	down, err := clientUpgrader.Upgrade(w, r, nil)
	if err != nil {
		_ = upstream.Close()
		return // Upgrade has answered the client.
	}
	wsrelay.Pair(down, upstream)
}
