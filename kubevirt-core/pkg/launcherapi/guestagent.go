package launcherapi

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// GuestInterface is a NIC as the guest agent reports it (guest-network-get-interfaces), loopback
// left out.
type GuestInterface struct {
	// InterfaceName is the guest's device name (eth0).
	InterfaceName string `json:"interfaceName"`
	MAC           string `json:"mac,omitempty"`
	// IPs the guest holds on it, IPv4 first, as KubeVirt takes the first one as the primary.
	IPs []string `json:"ips,omitempty"`
}

// GuestAgentServer answers from what the launcher's guest agent poller last read; the status
// carries the parts the VMI's status shows, this call the rest (users, filesystems).
type GuestAgentServer interface {
	// GuestInfo fails with FailedPrecondition while no guest agent is connected.
	GuestInfo(context.Context, *Empty) (*kubevirtv1.VirtualMachineInstanceGuestAgentInfo, error)
}

// GuestInfo is what the guest agent last told (virtctl guestosinfo, userlist, fslist).
func (c *Client) GuestInfo(ctx context.Context) (*kubevirtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	return invoke[kubevirtv1.VirtualMachineInstanceGuestAgentInfo](ctx, c, "GuestInfo", &Empty{})
}

// UnimplementedGuestAgentServer answers GuestInfo with Unimplemented, for fakes without a guest.
type UnimplementedGuestAgentServer struct{}

func (UnimplementedGuestAgentServer) GuestInfo(context.Context, *Empty) (*kubevirtv1.VirtualMachineInstanceGuestAgentInfo, error) {
	return nil, status.Error(codes.Unimplemented, "this launcher has no guest agent")
}
