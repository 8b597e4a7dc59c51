package cmdserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// GuestAgent is the part of the domain that reads the guest agent (*launcher.Manager). A Domain
// without it answers GuestInfo with Unimplemented.
type GuestAgent interface {
	GuestInfo() (*kubevirtv1.VirtualMachineInstanceGuestAgentInfo, error)
}

// GuestInfo returns what the guest agent last reported; FailedPrecondition without an agent.
func (s *Server) GuestInfo(context.Context, *launcherapi.Empty) (*kubevirtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	ga, ok := s.dom.(GuestAgent)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this launcher has no guest agent")
	}
	info, err := ga.GuestInfo()
	if err != nil {
		return nil, toStatus(err)
	}
	return info, nil
}
