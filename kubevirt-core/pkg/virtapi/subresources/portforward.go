package subresources

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
	"github.com/d8virt/kubevirt-core/pkg/wsrelay"
)

// portForwardResources are the port-forward subresources in discovery.
var portForwardResources = []metav1.APIResource{
	{Name: "virtualmachineinstances/portforward", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: []string{"get"}},
	{Name: "virtualmachines/portforward", Namespaced: true, Kind: "VirtualMachine", Verbs: []string{"get"}},
}

// portForwardRoutes serves KubeVirt's port forwarding: a WebSocket (plain.kubevirt.io) whose
// binary messages carry the bytes of one connection to a guest port, over TCP unless the path
// says udp. A VM's path reaches its VMI.
func (s *Server) portForwardRoutes(mux *http.ServeMux, prefix string) {
	for _, kind := range []string{"virtualmachineinstances", "virtualmachines"} {
		h := s.authorized("get", kind, "portforward", s.portForward(kind == "virtualmachines"))
		base := prefix + "/namespaces/{ns}/" + kind + "/{name}/portforward/{port}"
		mux.HandleFunc("GET "+base, h)
		mux.HandleFunc("GET "+base+"/{protocol}", h)
	}
}

func (s *Server) portForward(ofVM bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pf, err := wsrelay.ParsePortForward(r.PathValue("port"), r.PathValue("protocol"))
		if err != nil {
			// KubeVirt's routes take only {port:[0-9]+} and {protocol:tcp|udp}.
			apistatus.Write(w, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: err.Error(),
			}})
			return
		}
		key := types.NamespacedName{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
		if ofVM {
			vm := &kubevirtv1.VirtualMachine{}
			if err := s.Client.Get(r.Context(), key, vm); err != nil {
				apistatus.Write(w, notFoundOr(err, "virtualmachine", key.Name))
				return
			}
			if !vm.Status.Created {
				apistatus.Write(w, apierrors.NewConflict(vmResource, vm.Name, fmt.Errorf("VMI is not started")))
				return
			}
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := s.Client.Get(r.Context(), key, vmi); err != nil {
			apistatus.Write(w, notFoundOr(err, "virtualmachineinstance", key.Name))
			return
		}
		if serr := ValidatePortForward(vmi); serr != nil {
			apistatus.Write(w, serr)
			return
		}
		if s.Nodes == nil {
			apistatus.Write(w, apierrors.NewServiceUnavailable(fmt.Sprintf("virt-handler on node %q is not reachable", vmi.Status.NodeName)))
			return
		}
		s.Nodes.Stream(w, r, vmi.Status.NodeName, "/v1/namespaces/"+vmi.Namespace+"/virtualmachineinstances/"+vmi.Name+"/"+pf.Path())
	}
}

// ValidatePortForward answers as KubeVirt does for a VMI that cannot take a forward: paused is
// a conflict, not running a bad request.
func ValidatePortForward(vmi *kubevirtv1.VirtualMachineInstance) *apierrors.StatusError {
	if hasCondition(vmi, kubevirtv1.VirtualMachineInstancePaused, "") {
		return vmiConflict(vmi.Name, "VMI is paused")
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		return apierrors.NewBadRequest(fmt.Sprintf("Unable to connect to VirtualMachineInstance because phase is %s instead of %s", vmi.Status.Phase, kubevirtv1.Running))
	}
	return nil
}
