package subresources

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
)

// GuestAgentSubresources are the VMI's GET subresources that the guest agent answers, each with
// the type KubeVirt answers it with.
var GuestAgentSubresources = map[string]func() any{
	"guestosinfo":    func() any { return &kubevirtv1.VirtualMachineInstanceGuestAgentInfo{} },
	"userlist":       func() any { return &kubevirtv1.VirtualMachineInstanceGuestOSUserList{} },
	"filesystemlist": func() any { return &kubevirtv1.VirtualMachineInstanceFileSystemList{} },
}

// ValidateGuestAgent is KubeVirt's check before it asks the node for guest agent data.
func ValidateGuestAgent(vmi *kubevirtv1.VirtualMachineInstance) *apierrors.StatusError {
	if vmi.Status.Phase != kubevirtv1.Running {
		return vmiConflict(vmi.Name, "VMI is not running")
	}
	if !hasCondition(vmi, kubevirtv1.VirtualMachineInstanceAgentConnected, "") {
		return vmiConflict(vmi.Name, "VMI does not have guest agent connected")
	}
	return nil
}

// guestAgentHandler relays a guest agent GET to the VMI's virt-handler. Every failure answers 500
// with the error as plain text, the way KubeVirt's virt-api does for these three (so a 409
// "VMI does not have guest agent connected" reaches clients as a 500 with that text).
func (s *Server) guestAgentHandler(sub string) http.HandlerFunc {
	newResult := GuestAgentSubresources[sub]
	return func(w http.ResponseWriter, r *http.Request) {
		key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.Client.Get(r.Context(), key, vmi); err != nil {
			writeGetError(w, notFoundOr(err, "virtualmachineinstance", key.Name))
			return
		}
		if serr := ValidateGuestAgent(vmi); serr != nil {
			writeGetError(w, serr)
			return
		}
		if s.Nodes == nil {
			writeGetError(w, fmt.Errorf("virt-handler on node %q is not reachable", vmi.Status.NodeName))
			return
		}
		path := "/v1/namespaces/" + vmi.Namespace + "/virtualmachineinstances/" + vmi.Name + "/" + sub
		body, err := s.Nodes.Get(r.Context(), vmi.Status.NodeName, path)
		if err != nil {
			s.Log.Info("guest agent request failed", "subresource", sub, "vmi", key.String(), "err", err)
			writeGetError(w, err)
			return
		}
		// Decoded into KubeVirt's type and encoded again, as KubeVirt does: what reaches the
		// client is that type, whatever the handler added.
		result := newResult()
		if err := json.Unmarshal(body, result); err != nil {
			writeGetError(w, fmt.Errorf("decode the answer of virt-handler: %w", err))
			return
		}
		apistatus.WriteJSON(w, http.StatusOK, result)
	}
}

func writeGetError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = io.WriteString(w, err.Error())
}

// Get asks the handler on node for path and returns the body of a 200 answer; any other answer
// is an error carrying the handler's message.
func (p *NodeProxy) Get(ctx context.Context, node, path string) ([]byte, error) {
	base, serr := p.endpoint(ctx, node)
	if serr != nil {
		return nil, serr
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("virt-handler on node %q: %w", node, err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.tlsConfig()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("virt-handler on node %q: %w", node, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("virt-handler on node %q: read answer: %w", node, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(body)
		var st struct{ Message string }
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return nil, fmt.Errorf("virt-handler on node %q answered %d: %s", node, resp.StatusCode, msg)
	}
	return body, nil
}
