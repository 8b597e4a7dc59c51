// Package cmdserver is the launcher's side of the command protocol (launcherapi): it serves
// virt-handler's calls on top of the launcher's domain manager, maps its errors to gRPC codes, and
// tells the launcher when a client has seen the final status, so that the launcher can exit.
package cmdserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/d8virt/kubevirt-core/pkg/launcherapi"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/feed"
	"github.com/d8virt/kubevirt-core/pkg/virtlauncher/launcher"
)

// Domain is what the server drives: *launcher.Manager.
type Domain interface {
	Start(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error
	Shutdown(grace time.Duration) error
	Kill() error
	Pause() error
	Unpause() error
	SoftReboot() error
	Reset() error
	Freeze() error
	Unfreeze() error
	Status() launcherapi.DomainStatus
	Watch() *feed.Watcher[launcherapi.DomainStatus]
}

// Identity is the VMI the launcher Pod was made for (its --name, --namespace and --uid flags).
// Empty fields are not checked.
type Identity struct {
	Name, Namespace, UID string
}

// Server implements launcherapi.Server.
type Server struct {
	dom   Domain
	id    Identity
	grace time.Duration
	log   *slog.Logger

	deliverOnce sync.Once
	delivered   chan struct{}
}

var _ launcherapi.Server = (*Server)(nil)

// New returns a server for dom. grace is the guest's grace period for a Shutdown that names none.
func New(dom Domain, id Identity, grace time.Duration, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{dom: dom, id: id, grace: grace, log: log, delivered: make(chan struct{})}
}

// FinalDelivered is closed once a client got the final status (one with a Result) from Watch,
// Status or Sync.
func (s *Server) FinalDelivered() <-chan struct{} { return s.delivered }

func (s *Server) sent(st *launcherapi.DomainStatus) {
	if st.Result != nil {
		s.deliverOnce.Do(func() { close(s.delivered) })
	}
}

func (s *Server) Ping(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return &launcherapi.Empty{}, nil
}

// Sync starts the VMI the first time; later calls return the status.
func (s *Server) Sync(ctx context.Context, req *launcherapi.SyncRequest) (*launcherapi.DomainStatus, error) {
	if req == nil || req.VMI == nil {
		return nil, status.Error(codes.InvalidArgument, "no VMI in the request")
	}
	if err := s.id.check(req.VMI); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.dom.Start(ctx, req.VMI); err != nil {
		s.log.Error("sync: start the VMI", "vmi", req.VMI.Namespace+"/"+req.VMI.Name, "err", err)
		return nil, toStatus(err)
	}
	st := s.dom.Status()
	s.sent(&st)
	return &st, nil
}

// check refuses a VMI other than the one the Pod was made for: it would run under the wrong
// Pod's name, resources and volumes.
func (id Identity) check(vmi *kubevirtv1.VirtualMachineInstance) error {
	for _, c := range []struct{ what, want, got string }{
		{"name", id.Name, vmi.Name},
		{"namespace", id.Namespace, vmi.Namespace},
		{"uid", id.UID, string(vmi.UID)},
	} {
		if c.want != "" && c.want != c.got {
			return fmt.Errorf("VMI %s %q does not match this launcher's %q", c.what, c.got, c.want)
		}
	}
	return nil
}

func (s *Server) Shutdown(_ context.Context, req *launcherapi.ShutdownRequest) (*launcherapi.Empty, error) {
	grace := s.grace
	if req != nil && req.GracePeriodSeconds > 0 {
		grace = time.Duration(req.GracePeriodSeconds) * time.Second
	}
	return empty(s.dom.Shutdown(grace))
}

func (s *Server) Kill(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.Kill())
}

func (s *Server) Pause(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.Pause())
}

func (s *Server) Unpause(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.Unpause())
}

func (s *Server) Freeze(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.Freeze())
}

func (s *Server) Unfreeze(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.Unfreeze())
}

func (s *Server) SoftReboot(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.SoftReboot())
}

func (s *Server) Reset(context.Context, *launcherapi.Empty) (*launcherapi.Empty, error) {
	return empty(s.dom.Reset())
}

func (s *Server) Status(context.Context, *launcherapi.Empty) (*launcherapi.DomainStatus, error) {
	st := s.dom.Status()
	s.sent(&st)
	return &st, nil
}

// Watch streams the status until the final one (which ends the stream), the client leaves, or the
// launcher closes the feed on its way out.
func (s *Server) Watch(_ *launcherapi.Empty, stream grpc.ServerStreamingServer[launcherapi.DomainStatus]) error {
	w := s.dom.Watch()
	defer w.Close()
	ctx := stream.Context()
	for {
		st, err := w.Next(ctx)
		switch {
		case errors.Is(err, feed.ErrClosed):
			return nil
		case err != nil:
			return status.FromContextError(err).Err()
		}
		if err := stream.Send(&st); err != nil {
			return err
		}
		if st.Result != nil {
			s.sent(&st)
			return nil
		}
	}
}

func empty(err error) (*launcherapi.Empty, error) {
	if err != nil {
		return nil, toStatus(err)
	}
	return &launcherapi.Empty{}, nil
}

// toStatus gives the handler a code it can act on: FailedPrecondition for commands the domain's
// state does not allow (retrying later may work), InvalidArgument for a VMI that cannot run,
// Internal for failures of the launcher or libvirt.
func toStatus(err error) error {
	var invalid *launcher.InvalidVMIError
	switch {
	case errors.As(err, &invalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, launcher.ErrNoGuestAgent),
		errors.Is(err, launcher.ErrNotStarted),
		errors.Is(err, launcher.ErrFinished),
		errors.Is(err, launcher.ErrPaused),
		errors.Is(err, launcher.ErrMigrationInProgress),
		errors.Is(err, launcher.ErrAlreadyRunning):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}
