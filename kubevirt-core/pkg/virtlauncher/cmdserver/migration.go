package cmdserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// Migrator is the part of the domain that live-migrates (*launcher.Manager). A Domain without it
// answers the migration calls with Unimplemented.
type Migrator interface {
	PrepareIncoming(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, uid string) error
	Migrate(p launcher.MigrationParams) error
	CancelMigration(uid string) error
}

func (s *Server) migrator() (Migrator, error) {
	if m, ok := s.dom.(Migrator); ok {
		return m, nil
	}
	return nil, status.Error(codes.Unimplemented, "this launcher cannot migrate")
}

// PrepareMigrationTarget makes the launcher wait for the VMI's guest from a migration source.
func (s *Server) PrepareMigrationTarget(ctx context.Context, req *launcherapi.PrepareMigrationTargetRequest) (*launcherapi.DomainStatus, error) {
	mig, err := s.migrator()
	if err != nil {
		return nil, err
	}
	if req == nil || req.VMI == nil || req.MigrationUID == "" {
		return nil, status.Error(codes.InvalidArgument, "a VMI and a migration UID are required")
	}
	if err := s.id.check(req.VMI); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := mig.PrepareIncoming(ctx, req.VMI, req.MigrationUID); err != nil {
		s.log.Error("prepare the migration target", "vmi", req.VMI.Namespace+"/"+req.VMI.Name, "migration", req.MigrationUID, "err", err)
		return nil, toStatus(err)
	}
	st := s.dom.Status()
	s.sent(&st)
	return &st, nil
}

// Migrate starts moving the guest to the target the request names.
func (s *Server) Migrate(_ context.Context, req *launcherapi.MigrateRequest) (*launcherapi.DomainStatus, error) {
	mig, err := s.migrator()
	if err != nil {
		return nil, err
	}
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "no migration in the request")
	}
	err = mig.Migrate(launcher.MigrationParams{
		UID: req.MigrationUID, TargetAddress: req.TargetAddress, Ports: req.Ports, BandwidthMiB: req.BandwidthMiB,
	})
	if err != nil {
		s.log.Error("migrate", "migration", req.MigrationUID, "target", req.TargetAddress, "err", err)
		return nil, toStatus(err)
	}
	st := s.dom.Status()
	s.sent(&st)
	return &st, nil
}

// CancelMigration aborts an outgoing migration that still runs.
func (s *Server) CancelMigration(_ context.Context, req *launcherapi.CancelMigrationRequest) (*launcherapi.Empty, error) {
	mig, err := s.migrator()
	if err != nil {
		return nil, err
	}
	if req == nil || req.MigrationUID == "" {
		return nil, status.Error(codes.InvalidArgument, "no migration UID")
	}
	return empty(mig.CancelMigration(req.MigrationUID))
}
