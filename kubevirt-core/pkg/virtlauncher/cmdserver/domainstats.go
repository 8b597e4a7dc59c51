package cmdserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
)

// Stats is the part of the domain that reads libvirt's counters (*launcher.Manager). A Domain
// without it answers DomainStats with Unimplemented.
type Stats interface {
	DomainStats() (launcherapi.DomainStats, error)
}

// DomainStats reads the running domain's counters; FailedPrecondition before it started or after
// it ended.
func (s *Server) DomainStats(context.Context, *launcherapi.Empty) (*launcherapi.DomainStats, error) {
	st, ok := s.dom.(Stats)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "this launcher has no domain statistics")
	}
	out, err := st.DomainStats()
	if err != nil {
		return nil, toStatus(err)
	}
	return &out, nil
}
