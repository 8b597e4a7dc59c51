package rest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// portForward relays a WebSocket to a port of the guest. The masquerade binding forwards what
// arrives at the launcher Pod's IP to the guest, so the handler dials the Pod's IP: the guest
// sees the connection come from the handler, as from any client in the cluster. Several
// forwards to one VMI run side by side (virtctl port-forward opens one per connection).
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	pf, err := wsrelay.ParsePortForward(r.PathValue("port"), r.PathValue("protocol"))
	if err != nil {
		apistatus.Write(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	v, pod, serr := s.target(r)
	if serr != nil {
		apistatus.Write(w, serr)
		return
	}
	if pod.Status.PodIP == "" {
		apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("launcher of VMI %s has no IP yet", v.Name)))
		return
	}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(pf.Port))
	dctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	guest, err := (&net.Dialer{}).DialContext(dctx, pf.Protocol, addr)
	cancel()
	if err != nil {
		// KubeVirt answers a refused dial with 500 as well.
		apistatus.Write(w, apierrors.NewInternalError(fmt.Errorf("can't dial %s %s of VMI %s: %w", pf.Protocol, addr, v.Name, err)))
		return
	}
	s.relay(w, r, v, pf.Path(), guest, "")
}
