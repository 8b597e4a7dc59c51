package rest

import (
	"context"
	"net/http"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/apistatus"
)

// guestViews are the guest agent's GET subresources: each shows part of what the launcher's agent
// poller last read, in KubeVirt's types.
var guestViews = map[string]func(*kubevirtv1.VirtualMachineInstanceGuestAgentInfo) any{
	"guestosinfo": func(info *kubevirtv1.VirtualMachineInstanceGuestAgentInfo) any { return info },
	"userlist": func(info *kubevirtv1.VirtualMachineInstanceGuestAgentInfo) any {
		// KubeVirt's items are never null, so clients can range over them.
		items := append([]kubevirtv1.VirtualMachineInstanceGuestOSUser{}, info.UserList...)
		return &kubevirtv1.VirtualMachineInstanceGuestOSUserList{Items: items}
	},
	"filesystemlist": func(info *kubevirtv1.VirtualMachineInstanceGuestAgentInfo) any {
		items := append([]kubevirtv1.VirtualMachineInstanceFileSystem{}, info.FSInfo.Filesystems...)
		return &kubevirtv1.VirtualMachineInstanceFileSystemList{Items: items}
	},
}

// guestInfo answers one of guestViews from the VMI's launcher.
func (s *Server) guestInfo(name string, view func(*kubevirtv1.VirtualMachineInstanceGuestAgentInfo) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, c, ok := s.launcher(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		info, err := c.GuestInfo(ctx)
		if err != nil {
			apistatus.Write(w, launcherError("get "+name+" of", v.Name, err))
			return
		}
		apistatus.WriteJSON(w, http.StatusOK, view(info))
	}
}
